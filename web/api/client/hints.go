// hints.go: what a person can do about a refusal, in terms of the kith
// command's client.

package client

import (
	"fmt"

	"github.com/kith-keyserver/kith/identity"
)

// Hint says what to do about a refusal with code of a request about
// handle, naming the kith commands that help; "" when there is nothing
// to add to the server's message.
func Hint(code identity.Code, handle string) string {
	switch code {
	case identity.CodeHandleTaken:
		return fmt.Sprintf("choose another handle; if %q is yours, link the key with 'kith id add %s'", handle, handle)
	case identity.CodeUnknownIdentity:
		return fmt.Sprintf("check the spelling, or create it with 'kith id claim %s'", handle)
	case identity.CodeNotAuthorized, identity.CodeNotProven:
		return fmt.Sprintf("co-sign with a key already proven for %s: --by-ssh-key FILE or --by-pgp FPR ('kith id show %s' lists them)", handle, handle)
	case identity.CodeFactorLinked:
		return "the key is proven for another identity; revoke it there first"
	case identity.CodeAlreadyLinked:
		return "nothing to do: the key is already proven"
	case identity.CodeAlreadyRevoked:
		return fmt.Sprintf("nothing to do: the key is already revoked ('kith id show %s' lists it as revoked)", handle)
	case identity.CodeNotLinked:
		return fmt.Sprintf("'kith id show %s' lists what is linked", handle)
	case identity.CodeUnknownKey:
		return "upload the OpenPGP key first (gpg --export --armor FPR, then POST it to /pks/add)"
	case identity.CodeBadSignature, identity.CodeWrongKey, identity.CodeWrongNamespace:
		return "sign with the very key the statement names (for SSH: ssh-keygen -Y sign -n kith)"
	case identity.CodeExpired, identity.CodeNonceUsed, identity.CodeUnknownNonce:
		return "run the command again: it asks for a new statement"
	case identity.CodeBadHandle, identity.CodeReservedHandle:
		return "a handle is 2 to 39 lower-case letters, digits and '-', and not one the server keeps for itself; a host's is host:NAME, NAME its lower-case DNS name"
	case identity.CodeHostNotAllowed:
		return "the server's operator lists the host names whose keys it publishes (hosts.names); ask them to add this one"
	case identity.CodeRateLimited:
		return "wait a minute and try again"
	}
	return ""
}

// certificateHint is Hint for a refused certificate request for the key
// in keyFile.
func certificateHint(code identity.Code, handle, keyFile string) string {
	switch code {
	case identity.CodeNotProven:
		return fmt.Sprintf("only a key proven for %s gets a certificate: prove it with 'kith id add %s --ssh-key %s' ('kith id show %s' lists what is proven)", handle, handle, keyFile, handle)
	case identity.CodePrincipalNotAllowed:
		return "ask for the identity's own principals only, or leave --principals out"
	case identity.CodeBadValidity:
		return "ask for a shorter --validity, or leave it out for the server's default"
	case identity.CodeCADisabled:
		return "this server is not an SSH certificate authority (ssh_ca.enabled is off)"
	case identity.CodeRateLimited:
		return "use the certificate you got last, or wait an hour"
	}
	return Hint(code, handle)
}
