package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/fumehood/sandbox"
)

// secretFlag collects --secret NAME=HOST[,HOST...]: the secret's value is
// the tool's own environment variable NAME, never a command-line
// argument, which every user of the host can read in ps.
type secretFlag struct {
	secrets []sandbox.Secret
}

func (f *secretFlag) String() string {
	if f == nil {
		return ""
	}
	var s []string
	for _, sec := range f.secrets {
		s = append(s, sec.Name+"="+strings.Join(sec.Hosts, ","))
	}
	return strings.Join(s, " ")
}

func (f *secretFlag) Set(spec string) error {
	name, hosts, ok := strings.Cut(spec, "=")
	if !ok || name == "" || hosts == "" {
		return fmt.Errorf("want NAME=HOST[,HOST...] (the value is read from the environment variable NAME)")
	}
	value, set := os.LookupEnv(name)
	if !set || value == "" {
		return fmt.Errorf("the environment variable %s, which holds the secret's value, is not set or empty", name)
	}
	f.secrets = append(f.secrets, sandbox.Secret{Name: name, Value: value, Hosts: strings.Split(hosts, ",")})
	return nil
}
