package settings

import (
	"fmt"
	"net"
	"strconv"
)

// CheckHostPort checks a host:port address with a numeric port.
func CheckHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}

// CheckLoopback checks a host:port address whose host is a loopback IP
// or localhost: what only this machine may reach.
func CheckLoopback(addr string) error {
	if err := CheckHostPort(addr); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(addr)
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q: host must be a loopback address such as 127.0.0.1", addr)
	}
	return nil
}
