// tools_test.go: helpers that run the real tools (ssh-keygen, gpg) and build keys and
// signatures in Go for the tests.

package ssh

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// runTool runs a tool and returns its standard output, failing the test on error.
func runTool(t testing.TB, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	out, err := tryTool(stdin, nil, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}

// tryTool runs a tool and returns its standard output, or an error carrying its
// standard error.
func tryTool(stdin []byte, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, &toolError{err: err, stderr: strings.TrimSpace(stderr.String())}
	}
	return out, nil
}

type toolError struct {
	err    error
	stderr string
}

func (e *toolError) Error() string { return e.err.Error() + ": " + e.stderr }

// keygenKey is a key made by ssh-keygen.
type keygenKey struct {
	name    string // e.g. "ecdsa-384"
	private string // path of the private key
	public  string // path of the .pub file
}

// keygenTypes are the key types ssh-keygen makes without hardware, as ssh-keygen
// arguments. DSA is separate: this OpenSSH may not make it.
var keygenTypes = []struct {
	name string
	args []string
}{
	{"rsa", []string{"-t", "rsa", "-b", "2048"}},
	{"ecdsa-256", []string{"-t", "ecdsa", "-b", "256"}},
	{"ecdsa-384", []string{"-t", "ecdsa", "-b", "384"}},
	{"ecdsa-521", []string{"-t", "ecdsa", "-b", "521"}},
	{"ed25519", []string{"-t", "ed25519"}},
}

// keygen makes a key with ssh-keygen in dir.
func keygen(t testing.TB, dir, name string, args ...string) keygenKey {
	t.Helper()
	tool := testkit.Tool(t, "ssh-keygen")
	path := filepath.Join(dir, "id_"+name)
	args = append(args, "-q", "-N", "", "-C", name+"@kith.test", "-f", path)
	runTool(t, nil, tool, args...)
	return keygenKey{name: name, private: path, public: path + ".pub"}
}

// keygenDSA makes a DSA key, skipping the test if this OpenSSH no longer can (OpenSSH
// 10 removed DSA), even under CI: that is the tool's limit, not a missing tool.
func keygenDSA(t testing.TB, dir string) keygenKey {
	t.Helper()
	tool := testkit.Tool(t, "ssh-keygen")
	path := filepath.Join(dir, "id_dsa")
	if _, err := tryTool(nil, nil, tool, "-q", "-t", "dsa", "-N", "", "-C", "dsa@kith.test", "-f", path); err != nil {
		t.Skipf("this ssh-keygen does not make DSA keys: %v", err)
	}
	return keygenKey{name: "dsa", private: path, public: path + ".pub"}
}

// keygenSign signs message with ssh-keygen -Y sign and returns the armored signature.
func keygenSign(t testing.TB, key keygenKey, namespace string, message []byte, extra ...string) []byte {
	t.Helper()
	tool := testkit.Tool(t, "ssh-keygen")
	args := append([]string{"-Y", "sign", "-n", namespace, "-f", key.private}, extra...)
	return runTool(t, message, tool, args...)
}

// keygenCheck runs ssh-keygen -Y check-novalidate, which verifies a signature without
// asking whether the key is trusted, and returns its verdict.
func keygenCheck(t testing.TB, armored, message []byte, namespace string) error {
	t.Helper()
	tool := testkit.Tool(t, "ssh-keygen")
	sig := filepath.Join(t.TempDir(), "msg.sig")
	if err := os.WriteFile(sig, armored, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := tryTool(message, nil, tool, "-Y", "check-novalidate", "-n", namespace, "-s", sig)
	return err
}

// readKeyFile parses a .pub file.
func readKeyFile(t testing.TB, path string) *Key {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParsePublicKeyFile(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return k
}

// armorSSHSIG wraps a blob as ssh-keygen does: 70 base64 characters a line.
func armorSSHSIG(blob []byte) []byte {
	b64 := base64.StdEncoding.EncodeToString(blob)
	var b bytes.Buffer
	b.WriteString(armorBegin + "\n")
	for len(b64) > 70 {
		b.WriteString(b64[:70] + "\n")
		b64 = b64[70:]
	}
	b.WriteString(b64 + "\n" + armorEnd + "\n")
	return b.Bytes()
}

// sshsigSpec describes an SSHSIG to build in Go; zero fields take the usual values.
type sshsigSpec struct {
	magic     string // default "SSHSIG"
	version   uint32 // default 1
	namespace string // default Namespace
	hashAlg   string // default "sha512"
	reserved  []byte // written into the blob
	// signedReserved is the reserved field in the signed data; OpenSSH always signs
	// an empty one.
	signedReserved []byte
	// sign signs the signed data; it must be set.
	sign func(data []byte) *ssh.Signature
	// pub is the key written into the blob.
	pub ssh.PublicKey
}

// buildSSHSIG builds an armored SSHSIG over message, independently of the parser: the
// layout is written out from PROTOCOL.sshsig here, not taken from sshsig.go.
func buildSSHSIG(t testing.TB, s sshsigSpec, message []byte) []byte {
	t.Helper()
	if s.magic == "" {
		s.magic = "SSHSIG"
	}
	if s.version == 0 {
		s.version = 1
	}
	if s.namespace == "" {
		s.namespace = Namespace
	}
	if s.hashAlg == "" {
		s.hashAlg = "sha512"
	}
	var digest []byte
	switch s.hashAlg {
	case "sha256":
		d := sha256.Sum256(message)
		digest = d[:]
	default:
		d := sha512.Sum512(message)
		digest = d[:]
	}
	toSign := append([]byte("SSHSIG"), ssh.Marshal(struct {
		NS, Reserved, Hash, Digest []byte
	}{[]byte(s.namespace), s.signedReserved, []byte(s.hashAlg), digest})...)
	sig := s.sign(toSign)
	blob := append([]byte(s.magic), ssh.Marshal(struct {
		Version uint32
		Key     []byte
		NS      []byte
		Res     []byte
		Hash    []byte
		Sig     []byte
	}{s.version, s.pub.Marshal(), []byte(s.namespace), s.reserved, []byte(s.hashAlg), ssh.Marshal(sig)})...)
	return armorSSHSIG(blob)
}

// signerSpec returns a spec signing with signer (with algo, if not "").
func signerSpec(t testing.TB, signer ssh.Signer, algo string) sshsigSpec {
	t.Helper()
	return sshsigSpec{
		pub: signer.PublicKey(),
		sign: func(data []byte) *ssh.Signature {
			var sig *ssh.Signature
			var err error
			if algo != "" {
				sig, err = signer.(ssh.AlgorithmSigner).SignWithAlgorithm(rand.Reader, data, algo)
			} else {
				sig, err = signer.Sign(rand.Reader, data)
			}
			if err != nil {
				t.Fatal(err)
			}
			return sig
		},
	}
}

// newEd25519Signer makes an Ed25519 signer in Go.
func newEd25519Signer(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Security keys (FIDO) cannot be made without hardware, so these build the sk- public
// keys and signatures by hand, following PROTOCOL.u2f: the public key is the plain key
// plus an application string ("ssh:"), and the authenticator signs
//
//	SHA-256(application) || flags (1 byte) || counter (uint32) || SHA-256(data)
//
// (Ed25519 signs those bytes; ECDSA signs their SHA-256). The SSH signature is then the
// usual format name and blob followed by the flags byte and the counter. ssh-keygen
// verifies these without hardware, which the tests use as an independent check.
const skApplication = "ssh:"

// skMessage is what the authenticator signs.
func skMessage(data []byte, flags byte, counter uint32) []byte {
	app := sha256.Sum256([]byte(skApplication))
	msg := sha256.Sum256(data)
	out := append([]byte{}, app[:]...)
	out = append(out, flags, byte(counter>>24), byte(counter>>16), byte(counter>>8), byte(counter))
	return append(out, msg[:]...)
}

// skEd25519Spec returns a spec signing as an sk-ssh-ed25519 key with the given flags.
func skEd25519Spec(t testing.TB, flags byte, counter uint32) sshsigSpec {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blob := ssh.Marshal(struct {
		Type string
		Key  []byte
		App  string
	}{ssh.KeyAlgoSKED25519, pub, skApplication})
	sk, err := ParsePublicKey(blob)
	if err != nil {
		t.Fatal(err)
	}
	return sshsigSpec{
		pub: sk,
		sign: func(data []byte) *ssh.Signature {
			return &ssh.Signature{
				Format: ssh.KeyAlgoSKED25519,
				Blob:   ed25519.Sign(priv, skMessage(data, flags, counter)),
				Rest: ssh.Marshal(struct {
					F byte
					C uint32
				}{flags, counter}),
			}
		},
	}
}

// skECDSASpec returns a spec signing as an sk-ecdsa-sha2-nistp256 key with the given
// flags.
func skECDSASpec(t testing.TB, flags byte, counter uint32) sshsigSpec {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	point, err := priv.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	blob := ssh.Marshal(struct {
		Type  string
		Curve string
		Point []byte
		App   string
	}{ssh.KeyAlgoSKECDSA256, "nistp256", point, skApplication})
	sk, err := ParsePublicKey(blob)
	if err != nil {
		t.Fatal(err)
	}
	return sshsigSpec{
		pub: sk,
		sign: func(data []byte) *ssh.Signature {
			digest := sha256.Sum256(skMessage(data, flags, counter))
			r, s, err := ecdsa.Sign(rand.Reader, priv, digest[:])
			if err != nil {
				t.Fatal(err)
			}
			return &ssh.Signature{
				Format: ssh.KeyAlgoSKECDSA256,
				Blob:   ssh.Marshal(struct{ R, S *big.Int }{r, s}),
				Rest: ssh.Marshal(struct {
					F byte
					C uint32
				}{flags, counter}),
			}
		},
	}
}
