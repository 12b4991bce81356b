// accounts.go: the system account names that no stranger may hold. An
// SSH certificate names principals, and an sshd that trusts the CA
// (TrustedUserCAKeys) without an AuthorizedPrincipalsFile lets it in as
// any local account it names. Handles are first come, first served, and
// a certificate names its identity's handle: so the names the systems
// Kith's CA is meant for create by themselves (ubuntu, ec2-user, daemon,
// www-data, postgres) are kept from strangers twice: as handles and as
// certificate principals.

package identity

import (
	"slices"
	"strings"
)

// systemAccounts are the accounts a stock Debian, Ubuntu, RHEL, Fedora,
// Rocky, Alma, Amazon Linux, Alpine or Arch install or cloud image creates
// (base-passwd, setup, systemd's and the default packages' users), the
// default login users of cloud images and VM boxes, and the accounts
// common server packages create. Names a handle cannot spell (_apt,
// Debian-exim) need no entry.
var systemAccounts = []string{
	// Cloud images' and VM boxes' default login users.
	"admin", "almalinux", "alpine", "arch", "azureuser", "bitnami", "centos", "cloud-user",
	"core", "debian", "ec2-user", "fedora", "freebsd", "opc", "pi", "rhel", "rocky",
	"suse", "ubuntu", "vagrant",
	// Debian and Ubuntu (base-passwd and the standard system).
	"backup", "bin", "daemon", "dhcpcd", "dnsmasq", "fwupd-refresh", "games", "gnats",
	"irc", "landscape", "list", "lp", "lxd", "mail", "man", "messagebus", "news",
	"nobody", "pollinate", "polkitd", "proxy", "root", "sshd", "sync", "sys",
	"syslog", "tcpdump", "tss", "usbmux", "uucp", "uuidd", "www-data",
	// RHEL, Fedora and their rebuilds.
	"abrt", "adm", "chrony", "clevis", "cockpit-ws", "cockpit-wsinstance", "colord",
	"dbus", "ftp", "gdm", "geoclue", "gnome-initial-setup", "halt", "libstoragemgmt",
	"nfsnobody", "operator", "pesign", "pipewire", "rpc", "rpcuser", "rtkit",
	"saslauth", "setroubleshoot", "shutdown", "sssd", "unbound", "usbmuxd",
	// Alpine and Arch.
	"at", "cron", "cyrus", "guest", "http", "ntp", "smmsp", "squid", "vpopmail", "xfs",
	// Accounts that common server packages create.
	"apache", "avahi", "bind", "docker", "dovecot", "dovenull", "git", "gitlab-runner",
	"jenkins", "memcache", "mysql", "named", "nginx", "postfix", "postgres", "qemu",
	"redis", "statd", "www",
}

// systemAccountPrefixes start the names of accounts that systemd and its
// units create (systemd-network, systemd-resolve, systemd-timesync, ...).
var systemAccountPrefixes = []string{"systemd-"}

// IsSystemAccount reports whether name is a local account that a stock
// Linux install or cloud image creates by itself (see systemAccounts). No
// one may claim such a handle, and no certificate names such a principal
// because of its handle: only the operator grants one, through the
// principals file (CertificatePolicy.Principals).
func IsSystemAccount(name string) bool {
	if slices.Contains(systemAccounts, name) {
		return true
	}
	return slices.ContainsFunc(systemAccountPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}
