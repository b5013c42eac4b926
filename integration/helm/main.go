// helm: the helm v4 command line, built from the Go module proxy (helm.sh/helm/v4, pinned in
// go.mod) so that packaging/'s tests lint and render devlet's chart with the real helm without a
// binary download. Same behaviour and exit codes as the released helm CLI.
package main

import (
	"errors"
	"fmt"
	"os"

	helmcmd "helm.sh/helm/v4/pkg/cmd"
	"helm.sh/helm/v4/pkg/kube"
)

func main() {
	// The field manager name helm records in managedFields (used by install/upgrade).
	kube.ManagedFieldsManager = "helm"
	root, err := helmcmd.NewRootCmd(os.Stdout, os.Args[1:], helmcmd.SetupLogging)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helm:", err)
		os.Exit(1)
	}
	if err := root.Execute(); err != nil {
		var cerr helmcmd.CommandError
		if errors.As(err, &cerr) {
			os.Exit(cerr.ExitCode)
		}
		os.Exit(1)
	}
}
