package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/redrive/redrive/internal/auth"
)

func apikeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apikey",
		Short: "Manage API keys",
	}
	var name, scope string
	gen := &cobra.Command{
		Use:   "new --name NAME --scope read|write",
		Short: "Make a new API key: prints the key (once) and the line to add to the keys file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return fmt.Errorf("--name is required")
			}
			if !auth.Scope(scope).Valid() {
				return fmt.Errorf("--scope: must be read or write, got %q", scope)
			}
			secret, digest, err := auth.Generate()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "key:  %s\n", secret)
			fmt.Fprintln(out, "Keep it secret: Redrive stores only its SHA-256. Add this line under `keys:` in REDRIVE_API_KEYS_FILE:")
			fmt.Fprintf(out, "  - {name: %q, scope: %s, sha256: %s}\n", name, scope, digest)
			return nil
		},
	}
	gen.Flags().StringVar(&name, "name", "", "who or what the key is for, e.g. ops-readonly (shown in the audit log)")
	gen.Flags().StringVar(&scope, "scope", "read", "read or write")
	cmd.AddCommand(gen)
	return cmd
}
