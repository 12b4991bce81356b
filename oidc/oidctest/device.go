// device.go: the device authorization grant (RFC 8628): the provider
// library's device and token endpoints over the in-memory storage, and
// the page where the person enters the user code and approves or denies
// it, as a test drives it:
//
//	GET  /device?user_code=CODE   a form with the user code, a username,
//	                              and approve and deny buttons
//	POST /device                  user_code, username, action=approve|deny

package oidctest

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/op"
)

// deviceAuth is a device authorization the provider issued.
type deviceAuth struct {
	state    op.DeviceAuthorizationState
	userCode string
}

var _ op.DeviceAuthorizationStorage = (*storage)(nil)

// StoreDeviceAuthorization keeps a new device authorization.
func (s *storage) StoreDeviceAuthorization(_ context.Context, clientID, deviceCode, userCode string, expires time.Time, scopes []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[clientID]
	if !ok {
		return notFound{"client"}
	}
	for _, d := range s.devices {
		if d.userCode == userCode {
			return op.ErrDuplicateUserCode
		}
	}
	d := &deviceAuth{userCode: userCode, state: op.DeviceAuthorizationState{
		ClientID: clientID, Scopes: slices.Clone(scopes), Expires: expires,
	}}
	if len(c.Audience) > 0 {
		d.state.Audience = slices.Clone(c.Audience)
	}
	s.devices[deviceCode] = d
	return nil
}

// GetDeviceAuthorizatonState returns a device authorization's state; a
// finished one (approved or denied) is handed out once, as a code is,
// unless Config.ReissueDeviceTokens.
func (s *storage) GetDeviceAuthorizatonState(_ context.Context, clientID, deviceCode string) (*op.DeviceAuthorizationState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.devices[deviceCode]
	if !ok || d.state.ClientID != clientID {
		return nil, notFound{"device authorization"}
	}
	st := d.state
	if (st.Done || st.Denied) && !s.reissue {
		delete(s.devices, deviceCode)
	}
	s.devicePolls++
	return &st, nil
}

// decideDevice approves (or denies) the device authorization with the
// user code as the user with username.
func (s *storage) decideDevice(userCode, username string, approve bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d *deviceAuth
	for _, x := range s.devices {
		if strings.EqualFold(x.userCode, strings.TrimSpace(userCode)) {
			d = x
		}
	}
	if d == nil || time.Now().After(d.state.Expires) || d.state.Done || d.state.Denied {
		return notFound{"pending device authorization for that code"}
	}
	if !approve {
		d.state.Denied = true
		return nil
	}
	for _, u := range s.users {
		if u.Username == username {
			d.state.Subject, d.state.AMR = u.Subject, []string{"pwd"}
			d.state.AuthTime, d.state.Done = time.Now().UTC().Truncate(time.Second), true
			return nil
		}
	}
	return notFound{"user " + username}
}

var deviceForm = template.Must(template.New("device").Parse(`<!doctype html>
<title>Test provider: approve a device</title>
<form method="post" action="/device">
<label>Code <input name="user_code" value="{{.UserCode}}"></label>
<label>Username <input name="username" value="{{.Username}}"></label>
<button type="submit" name="action" value="approve">Approve</button>
<button type="submit" name="action" value="deny">Deny</button>
</form>
`))

// device is the page the verification URI names: GET shows the form,
// POST approves or denies the code as the named user.
func (s *Server) device(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		def := ""
		if len(s.cfg.Users) > 0 {
			def = s.cfg.Users[0].Username
		}
		_ = deviceForm.Execute(w, struct{ UserCode, Username string }{r.Form.Get("user_code"), def})
	case http.MethodPost:
		action := r.PostForm.Get("action")
		if action != "approve" && action != "deny" {
			http.Error(w, "action must be approve or deny", http.StatusBadRequest)
			return
		}
		err := s.storage.decideDevice(r.PostForm.Get("user_code"), r.PostForm.Get("username"), action == "approve")
		var nf notFound
		switch {
		case errors.As(err, &nf):
			http.Error(w, err.Error(), http.StatusForbidden)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write([]byte("Done: return to your device.\n"))
		}
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// DevicePolls returns how many times the token endpoint was asked about a
// device authorization.
func (s *Server) DevicePolls() int {
	s.storage.mu.Lock()
	defer s.storage.mu.Unlock()
	return s.storage.devicePolls
}
