// providers.go: the set of configured providers, by name, as the login
// pages list them and the routes /login/{provider} find them.

package oidc

import (
	"context"
	"fmt"
	"net/http"
)

// Providers is the set of configured providers, keyed by name, in
// configuration order.
type Providers struct {
	byName map[string]*Provider
	names  []string
}

// NewProviders makes a Provider of each configuration (see NewProvider);
// names must be unique. Providers that are down are retried on their next
// login unless opts.RequireDiscovery is set.
func NewProviders(ctx context.Context, cfgs []ProviderConfig, opts Options) (*Providers, error) {
	ps := &Providers{byName: make(map[string]*Provider, len(cfgs))}
	for _, c := range cfgs {
		if _, dup := ps.byName[c.Name]; dup {
			return nil, &ConfigError{Provider: c.Name, Field: "name", Reason: "is used by two providers"}
		}
		p, err := NewProvider(ctx, c, opts)
		if err != nil {
			return nil, err
		}
		ps.byName[c.Name] = p
		ps.names = append(ps.names, c.Name)
	}
	return ps, nil
}

// Get returns the provider of that name.
func (ps *Providers) Get(name string) (*Provider, bool) {
	if ps == nil {
		return nil, false
	}
	p, ok := ps.byName[name]
	return p, ok
}

// Names returns the providers' names in configuration order.
func (ps *Providers) Names() []string {
	if ps == nil {
		return nil
	}
	return append([]string(nil), ps.names...)
}

// Begin starts a login at the named provider (see Provider.Begin); an
// unknown name is ErrUnknownProvider.
func (ps *Providers) Begin(w http.ResponseWriter, r *http.Request, name, next string) error {
	p, ok := ps.Get(name)
	if !ok {
		return fmt.Errorf("oidc: begin %q: %w", name, ErrUnknownProvider)
	}
	return p.Begin(w, r, next)
}

// BeginWith starts a login at the named provider with opts (see
// Provider.BeginWith); an unknown name is ErrUnknownProvider.
func (ps *Providers) BeginWith(w http.ResponseWriter, r *http.Request, name string, opts BeginOptions) error {
	p, ok := ps.Get(name)
	if !ok {
		return fmt.Errorf("oidc: begin %q: %w", name, ErrUnknownProvider)
	}
	return p.BeginWith(w, r, opts)
}

// Finish completes a login at the named provider (see Provider.Finish); an
// unknown name is ErrUnknownProvider.
func (ps *Providers) Finish(w http.ResponseWriter, r *http.Request, name string) (*Login, error) {
	p, ok := ps.Get(name)
	if !ok {
		return nil, fmt.Errorf("oidc: finish %q: %w", name, ErrUnknownProvider)
	}
	return p.Finish(w, r)
}
