package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/config"
)

func TestSchemaRegistrySettings(t *testing.T) {
	c, err := config.Load(env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.SchemaRegistry.Enabled() || c.SchemaRegistry.Timeout != 10*time.Second {
		t.Errorf("default = %+v, want off with a 10s timeout", c.SchemaRegistry)
	}
	c, err = config.Load(env(map[string]string{
		"REDRIVE_SCHEMA_REGISTRY_URL":      "http://sr-1:8081, https://sr-2:8081",
		"REDRIVE_SCHEMA_REGISTRY_USERNAME": "key",
		"REDRIVE_SCHEMA_REGISTRY_PASSWORD": "secret",
		"REDRIVE_SCHEMA_REGISTRY_TIMEOUT":  "3s",
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	sr := c.SchemaRegistry
	if !sr.Enabled() || len(sr.URLs) != 2 || sr.URLs[1] != "https://sr-2:8081" || sr.Username != "key" || sr.Password != "secret" || sr.Timeout != 3*time.Second {
		t.Errorf("loaded = %+v", sr)
	}
	if tlsCfg, err := sr.TLSConfig(); err != nil || tlsCfg != nil {
		t.Errorf("TLSConfig() = %v, %v; want nil (system roots)", tlsCfg, err)
	}
}

func TestBadSchemaRegistrySettingsNameTheSetting(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"REDRIVE_SCHEMA_REGISTRY_URL": "sr:8081"}, "REDRIVE_SCHEMA_REGISTRY_URL"},
		{map[string]string{"REDRIVE_SCHEMA_REGISTRY_URL": "http://sr", "REDRIVE_SCHEMA_REGISTRY_PASSWORD": "p"}, "REDRIVE_SCHEMA_REGISTRY_USERNAME"},
		{map[string]string{"REDRIVE_SCHEMA_REGISTRY_URL": "http://sr", "REDRIVE_SCHEMA_REGISTRY_USERNAME": "u", "REDRIVE_SCHEMA_REGISTRY_BEARER_TOKEN": "t"}, "REDRIVE_SCHEMA_REGISTRY_BEARER_TOKEN"},
		{map[string]string{"REDRIVE_SCHEMA_REGISTRY_URL": "http://sr", "REDRIVE_SCHEMA_REGISTRY_TLS_CERT_FILE": "c.pem"}, "REDRIVE_SCHEMA_REGISTRY_TLS_KEY_FILE"},
		{map[string]string{"REDRIVE_SCHEMA_REGISTRY_URL": "http://sr", "REDRIVE_SCHEMA_REGISTRY_TIMEOUT": "0s"}, "REDRIVE_SCHEMA_REGISTRY_TIMEOUT"},
		{map[string]string{"REDRIVE_SCHEMA_REGISTRY_BEARER_TOKEN": "t"}, "REDRIVE_SCHEMA_REGISTRY_URL: required"},
	} {
		_, err := config.Load(env(tc.env), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%v) = %v, want an error naming %s", tc.env, err, tc.want)
		}
	}
	c, err := config.Load(env(map[string]string{"REDRIVE_SCHEMA_REGISTRY_URL": "https://sr", "REDRIVE_SCHEMA_REGISTRY_TLS_CA_FILE": "/nonexistent.pem"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SchemaRegistry.TLSConfig(); err == nil || !strings.Contains(err.Error(), "REDRIVE_SCHEMA_REGISTRY_TLS_CA_FILE") {
		t.Errorf("TLSConfig() = %v, want an error naming REDRIVE_SCHEMA_REGISTRY_TLS_CA_FILE", err)
	}
}
