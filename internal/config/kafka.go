package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// KafkaOpts returns the franz-go options for the configured brokers, TLS and SASL.
func (c *Config) KafkaOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.KafkaBrokers...)}
	k := c.Kafka
	if k.TLS || k.TLSCAFile != "" || k.TLSCertFile != "" {
		cfg, err := k.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.Dialer((&tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}).DialContext))
	}
	switch k.SASLMechanism {
	case "":
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: k.SASLUser, Pass: k.SASLPassword}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: k.SASLUser, Pass: k.SASLPassword}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: k.SASLUser, Pass: k.SASLPassword}.AsSha512Mechanism()))
	case mechanismOAuth:
		m, err := k.oauthMechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	case mechanismMSK:
		m, err := mskMechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	default:
		return nil, fmt.Errorf("REDRIVE_KAFKA_SASL_MECHANISM: unknown mechanism %q", k.SASLMechanism)
	}
	return opts, nil
}

func (k KafkaSecurity) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: k.TLSServerName}
	if k.TLSCAFile != "" {
		pem, err := os.ReadFile(k.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("REDRIVE_KAFKA_TLS_CA_FILE: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("REDRIVE_KAFKA_TLS_CA_FILE: no PEM certificates found")
		}
		cfg.RootCAs = pool
	}
	if k.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(k.TLSCertFile, k.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("REDRIVE_KAFKA_TLS_CERT_FILE/KEY_FILE: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// GroupOpts returns the consumer-group options of the ingest consumer: the
// session and rebalance timeouts and, when set, the static group instance id.
// The heartbeat interval stays franz-go's 3s unless a short session timeout
// needs it lower (a third of the session timeout, as Kafka advises).
func (c *Config) GroupOpts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SessionTimeout(c.KafkaSessionTimeout),
		kgo.RebalanceTimeout(c.KafkaRebalanceTimeout),
		kgo.HeartbeatInterval(min(3*time.Second, c.KafkaSessionTimeout/3)),
	}
	if c.GroupInstanceID != "" {
		opts = append(opts, kgo.InstanceID(c.GroupInstanceID))
	}
	return opts
}

// SchemaRegistryTLS returns the TLS configuration for the schema registry:
// nil (the system's roots) unless a CA or a client certificate is set.
func (s SchemaRegistry) TLSConfig() (*tls.Config, error) {
	if s.TLSCAFile == "" && s.TLSCertFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.TLSCAFile != "" {
		pem, err := os.ReadFile(s.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("REDRIVE_SCHEMA_REGISTRY_TLS_CA_FILE: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("REDRIVE_SCHEMA_REGISTRY_TLS_CA_FILE: no PEM certificates found")
		}
		cfg.RootCAs = pool
	}
	if s.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.TLSCertFile, s.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("REDRIVE_SCHEMA_REGISTRY_TLS_CERT_FILE/KEY_FILE: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
