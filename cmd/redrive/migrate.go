package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/redrive/redrive/internal/config"
	"github.com/redrive/redrive/internal/store"
)

func migrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:       "migrate up|down|status",
		Short:     "Apply, roll back or list the schema migrations",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"up", "down", "status"},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			log := newLogger(cfg)
			if cfg.DatabaseURL == "" {
				return fmt.Errorf("REDRIVE_DATABASE_URL (or --database-url) is required")
			}
			ctx := cmd.Context()
			st, err := store.Open(ctx, cfg.DatabaseURL, store.OpenOptions{})
			if err != nil {
				return fmt.Errorf("postgres: %w", err)
			}
			defer st.Close()
			m, err := st.Migrator(log)
			if err != nil {
				return err
			}
			defer m.Close()
			switch args[0] {
			case "up":
				n, err := m.Up(ctx)
				if err != nil {
					return err
				}
				fmt.Printf("applied %d migration(s)\n", n)
			case "down":
				return m.Down(ctx)
			case "status":
				st, err := m.Status(ctx)
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "VERSION\tMIGRATION\tAPPLIED")
				for _, s := range st {
					fmt.Fprintf(w, "%d\t%s\t%v\n", s.Version, s.Name, s.Applied)
				}
				return w.Flush()
			default:
				return fmt.Errorf("unknown migrate command %q: want up, down or status", args[0])
			}
			return nil
		},
	}
	config.RegisterFlags(cmd.Flags())
	return cmd
}
