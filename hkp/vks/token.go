// token.go: upload tokens. An upload answers with a token that lets the
// uploader ask for mails about that key for UploadTokenTTL; it is
// stateless (the key's fingerprint and an expiry under an HMAC with a key
// every node shares) and grants nothing a stranger lacks: anyone may
// upload a public key and get one. The mail is what proves.

package vks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"time"
)

const tokenMACSize = 16

var errBadToken = errors.New("not a valid upload token: upload the key again")

// uploadToken returns the token for the key with fingerprint fp.
func (h *Handler) uploadToken(fp []byte, now time.Time) string {
	b := make([]byte, 0, 1+len(fp)+8+tokenMACSize)
	b = append(b, byte(len(fp)))
	b = append(b, fp...)
	b = binary.BigEndian.AppendUint64(b, uint64(now.Add(UploadTokenTTL).Unix()))
	b = append(b, h.tokenMAC(b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// checkUploadToken returns the fingerprint a valid, unexpired token names.
func (h *Handler) checkUploadToken(tok string, now time.Time) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 1 {
		return nil, errBadToken
	}
	n := int(b[0])
	if (n != 20 && n != 32) || len(b) != 1+n+8+tokenMACSize {
		return nil, errBadToken
	}
	body, mac := b[:len(b)-tokenMACSize], b[len(b)-tokenMACSize:]
	if !hmac.Equal(mac, h.tokenMAC(body)) {
		return nil, errBadToken
	}
	if exp := int64(binary.BigEndian.Uint64(body[1+n:])); now.Unix() > exp {
		return nil, errors.New("the upload token expired: upload the key again")
	}
	return body[1 : 1+n], nil
}

func (h *Handler) tokenMAC(b []byte) []byte {
	m := hmac.New(sha256.New, h.opts.TokenKey)
	m.Write([]byte("kith vks upload token\x00"))
	m.Write(b)
	return m.Sum(nil)[:tokenMACSize]
}
