package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

// healthCmd probes a running server's /readyz: a health check for images
// without curl (the distroless image; Docker Compose's healthcheck runs it).
func healthCmd() *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Exit 0 when a running redrive answers /readyz with 200, else 1 (a container health check)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return fmt.Errorf("--url: %w", err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("not ready: %w", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("not ready: %s %s", resp.Status, body)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ready: %s\n", body)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "http://127.0.0.1:8080/readyz", "the readiness endpoint to probe")
	return cmd
}
