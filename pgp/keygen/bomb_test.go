package keygen

import (
	"bytes"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

func TestBombSignaturesCarryTheRightDigestPrefix(t *testing.T) {
	raw, err := Bomb{UserIDs: 1, SigsPerUserID: 5, Subkeys: 1, SigsPerSubkey: 3}.Build()
	if err != nil {
		t.Fatal(err)
	}
	r := packet.NewReader(bytes.NewReader(raw))
	var primary, sub *packet.PublicKey
	var uid *packet.UserId
	sigs := map[packet.SignatureType]int{}
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch p := p.(type) {
		case *packet.PublicKey:
			if !p.IsSubkey {
				primary = p
				pub := p.PublicKey.(*rsa.PublicKey)
				if pub.N.BitLen() != 16384 || pub.E != 1<<24-1 {
					t.Errorf("primary: %d bits, e=%d", pub.N.BitLen(), pub.E)
				}
			} else {
				sub = p
			}
		case *packet.UserId:
			uid = p
		case *packet.Signature:
			if *p.IssuerKeyId != primary.KeyId || !bytes.Equal(p.IssuerFingerprint, primary.Fingerprint) {
				t.Errorf("signature does not name the primary key as issuer")
			}
			h := sha256.New()
			primary.SerializeForHash(h)
			switch p.SigType {
			case packet.SigTypePositiveCert:
				var hdr [5]byte
				hdr[0] = 0xb4
				binary.BigEndian.PutUint32(hdr[1:], uint32(len(uid.Id)))
				h.Write(hdr[:])
				h.Write([]byte(uid.Id))
			case packet.SigTypeSubkeyBinding:
				sub.SerializeForHash(h)
			}
			h.Write(p.HashSuffix)
			if d := h.Sum(nil); !bytes.Equal(d[:2], p.HashTag[:]) {
				t.Errorf("%v signature: digest prefix %x, tag %x", p.SigType, d[:2], p.HashTag)
			}
			if p.RSASignature.BitLength() > 16384 {
				t.Errorf("signature value of %d bits", p.RSASignature.BitLength())
			}
			sigs[p.SigType]++
		}
	}
	if sigs[packet.SigTypePositiveCert] != 5 || sigs[packet.SigTypeSubkeyBinding] != 3 {
		t.Errorf("signatures: %v", sigs)
	}
	full, err := Bomb{}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(full) > 2<<20 || len(full) < 2<<20-16<<10 {
		t.Errorf("default bomb of %d bytes, want just under 2 MiB", len(full))
	}
}
