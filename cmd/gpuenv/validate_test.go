package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/spec"
)

func TestVarFlagsLoadOptions(t *testing.T) {
	env := []string{"GPUENV_VAR_cuda=12.4", "HOME=/root"}
	cases := []struct {
		name     string
		flags    varFlags
		want     spec.LoadOptions
		wantErrs []string
	}{
		{
			name: "none",
			want: spec.LoadOptions{Environ: env},
		},
		{
			name:  "vars and files",
			flags: varFlags{vars: []string{"cuda=12.6", "devices=[\"0\", \"1\"]", "empty="}, varFiles: []string{"a.vars", "b.vars"}},
			want: spec.LoadOptions{
				Vars:     map[string]string{"cuda": "12.6", "devices": `["0", "1"]`, "empty": ""},
				VarFiles: []string{"a.vars", "b.vars"},
				Environ:  env,
			},
		},
		{
			name:  "the last of repeated assignments wins",
			flags: varFlags{vars: []string{"cuda=12.4", "cuda=12.6"}},
			want:  spec.LoadOptions{Vars: map[string]string{"cuda": "12.6"}, Environ: env},
		},
		{
			name:  "value with equals signs",
			flags: varFlags{vars: []string{"opts=a=b"}},
			want:  spec.LoadOptions{Vars: map[string]string{"opts": "a=b"}, Environ: env},
		},
		{
			name:     "malformed",
			flags:    varFlags{vars: []string{"cuda", "=12.4", "ok=1"}},
			want:     spec.LoadOptions{Vars: map[string]string{"ok": "1"}, Environ: env},
			wantErrs: []string{`The option --var "cuda" is not of the form NAME=VALUE, such as --var cuda=12.4.`, `The option --var "=12.4" is not of the form NAME=VALUE, such as --var cuda=12.4.`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, diags := c.flags.loadOptions(env)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			var errs []string
			for _, d := range diags {
				if d.Summary != "Invalid --var option" || d.Subject != nil {
					t.Errorf("diagnostic %q with subject %v", d.Summary, d.Subject)
				}
				errs = append(errs, d.Detail)
			}
			if diff := cmp.Diff(c.wantErrs, errs); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
		})
	}
}
