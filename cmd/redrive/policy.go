package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/redrive/redrive/internal/config"
	"github.com/redrive/redrive/internal/policy"
)

func policyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Check policy files and show the effective policy of a topic",
	}
	cmd.AddCommand(policyValidateCmd(), policyExplainCmd())
	return cmd
}

// defaultPoliciesDir is REDRIVE_POLICIES_DIR, else "policies".
func defaultPoliciesDir() string {
	if dir, ok := os.LookupEnv("REDRIVE_POLICIES_DIR"); ok && dir != "" {
		return dir
	}
	return "policies"
}

// loadPolicies loads the policy files in dir under the retry policy limits
// serve would apply (REDRIVE_RETRY_MAX_ATTEMPTS, REDRIVE_RETRY_MIN_INTERVAL),
// so that validate and explain judge files as serve does.
func loadPolicies(dir string) (*policy.Set, error) {
	cfg, err := config.Load(os.LookupEnv, nil)
	if err != nil {
		return nil, err
	}
	limits := policy.Limits{MaxAttempts: cfg.RetryMaxAttempts, MinInterval: cfg.RetryMinInterval}
	return limits.LoadDir(dir)
}

func policyValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate [DIR]",
		Short: "Load every policy file in DIR (default: REDRIVE_POLICIES_DIR or ./policies) and report every problem",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := defaultPoliciesDir()
			if len(args) == 1 {
				dir = args[0]
			}
			set, err := loadPolicies(dir)
			if err != nil {
				return err
			}
			topics := set.Topics()
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s, %s: valid\n", dir, count(len(set.Files()), "file"), count(len(topics), "topic entry"))
			return nil
		},
	}
}

func policyExplainCmd() *cobra.Command {
	var dir, typ, env string
	cmd := &cobra.Command{
		Use:   "explain TOPIC",
		Short: "Print the effective merged policy of TOPIC and its delay schedule (without jitter)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := loadPolicies(dir)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("env") {
				cfg, err := config.Load(os.LookupEnv, nil)
				if err != nil {
					return err
				}
				env = cfg.Environment
			}
			return policy.ExplainIn(set.Resolve(args[0], typ), &env, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&dir, "policies", defaultPoliciesDir(), "policy directory")
	cmd.Flags().StringVar(&typ, "type", "", "record (event/job) type, for per-type overrides")
	cmd.Flags().StringVar(&env, "env", "", "environment the ingest filters' when_env is checked against (default: REDRIVE_ENVIRONMENT)")
	return cmd
}
