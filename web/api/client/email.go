// email.go: an address of an OpenPGP key, verified or withdrawn by mail,
// through the VKS API (as keys.openpgp.org's clients do): the key is
// uploaded from gpg, and the server mails the address a link; following
// the link (in a browser) publishes or withdraws the address.

package client

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/kith-keyserver/kith/identity"
)

// EmailStatus is the VKS answer about a key: each address of its user
// IDs and its status (published, pending, unpublished, revoked).
type EmailStatus struct {
	KeyFpr string            `json:"key_fpr"`
	Status map[string]string `json:"status"`
	Token  string            `json:"token"`
}

// RequestEmail has the server mail addr a link that publishes it for the
// OpenPGP key of s (action identity.EmailVerify) or withdraws it
// (identity.EmailWithdraw): it uploads gpg's copy of the key (POST
// /vks/v1/upload) and asks for the mail (POST /vks/v1/request-verify or
// request-withdraw). It returns the key's addresses as the server then
// sees them. A refusal (the server's per-client limit, the cap of mails
// one address receives an hour, an address the key lacks) is an error
// that quotes the server.
func (c *Client) RequestEmail(ctx context.Context, s Signer, action identity.EmailAction, addr string) (EmailStatus, error) {
	op := string(action) + " " + addr
	if s.Kind != identity.KindPGP {
		return EmailStatus{}, fmt.Errorf("%s: addresses are verified for OpenPGP keys", op)
	}
	if action != identity.EmailVerify && action != identity.EmailWithdraw {
		return EmailStatus{}, fmt.Errorf("%s: the action is verify or withdraw", op)
	}
	armored, err := s.ExportPGP(ctx)
	if err != nil {
		return EmailStatus{}, err
	}
	var up EmailStatus
	if err := c.vks(ctx, "upload OpenPGP key "+s.ID, "/vks/v1/upload", map[string]string{"keytext": string(armored)}, &up); err != nil {
		return EmailStatus{}, err
	}
	addr = strings.ToLower(strings.TrimSpace(addr))
	if _, ok := up.Status[addr]; !ok {
		return up, fmt.Errorf("%s: key %s has no user ID with this address (it has: %s)", op, up.KeyFpr, addressList(up.Status))
	}
	var out EmailStatus
	err = c.vks(ctx, op, "/vks/v1/request-"+string(action), map[string]any{"token": up.Token, "addresses": []string{addr}}, &out)
	return out, err
}

// vks posts a JSON request to the VKS API and decodes its answer; an
// error answer ({"error": "..."}) becomes an error quoting it.
func (c *Client) vks(ctx context.Context, op, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	status, raw, err := c.do(ctx, http.MethodPost, path, "application/json", body, maxDocBody)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if status != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(raw, &e) != nil || e.Error == "" {
			e.Error = clip(strings.TrimSpace(string(raw)))
		}
		return fmt.Errorf("%s: the server refused (%d %s): %s", op, status, http.StatusText(status), e.Error)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: the server's answer is not the expected JSON: %w", op, err)
	}
	return nil
}

// addressList lists a status map's addresses, or says there are none.
func addressList(st map[string]string) string {
	if len(st) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(st)), ", ")
}
