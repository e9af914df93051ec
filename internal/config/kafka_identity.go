package config

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Kafka identities beyond a user name and password: OAUTHBEARER tokens from
// an OAuth 2.0 token endpoint (client credentials), and AWS IAM for Amazon
// MSK. Both hand franz-go a function it calls at every SASL authentication,
// so credentials are refreshed without a restart: the token source keeps a
// token until shortly before it expires, the AWS SDK's credential cache until
// its credentials do.

// Mechanisms beyond PLAIN and SCRAM.
const (
	mechanismOAuth = "OAUTHBEARER"
	mechanismMSK   = "AWS_MSK_IAM"
)

// oauthExtensionKey is an RFC 7628 extension key ("auth" is reserved).
var oauthExtensionKey = regexp.MustCompile(`^[A-Za-z]+$`)

// oauthMechanism is OAUTHBEARER with tokens from the client-credentials grant.
func (k KafkaSecurity) oauthMechanism() (sasl.Mechanism, error) {
	ext, err := k.oauthExtensions()
	if err != nil {
		return nil, err
	}
	cc := clientcredentials.Config{ClientID: k.OAuthClientID, ClientSecret: k.OAuthClientSecret,
		TokenURL: k.OAuthTokenURL, Scopes: k.OAuthScopes}
	// ReuseTokenSource: a token is fetched once and reused until it is
	// about to expire. Its fetches use their own context, bounded: the
	// context of one authentication must not end the source's.
	tokens := oauth2.ReuseTokenSource(nil, cc.TokenSource(context.Background()))
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		t, err := tokenWithin(ctx, tokens)
		if err != nil {
			return oauth.Auth{}, fmt.Errorf("kafka OAUTHBEARER: token from %s: %w", k.OAuthTokenURL, err)
		}
		return oauth.Auth{Token: t.AccessToken, Extensions: ext}, nil
	}), nil
}

// tokenWithin asks tokens for a token, giving up when ctx ends.
func tokenWithin(ctx context.Context, tokens oauth2.TokenSource) (*oauth2.Token, error) {
	type result struct {
		t   *oauth2.Token
		err error
	}
	done := make(chan result, 1)
	go func() {
		t, err := tokens.Token()
		done <- result{t, err}
	}()
	select {
	case r := <-done:
		return r.t, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// oauthExtensions parses REDRIVE_KAFKA_OAUTH_EXTENSIONS (key=value items).
func (k KafkaSecurity) oauthExtensions() (map[string]string, error) {
	if len(k.OAuthExtensions) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(k.OAuthExtensions))
	for _, item := range k.OAuthExtensions {
		key, value, ok := strings.Cut(item, "=")
		if !ok || !oauthExtensionKey.MatchString(key) || key == "auth" || value == "" {
			return nil, fmt.Errorf("REDRIVE_KAFKA_OAUTH_EXTENSIONS: %q: want key=value, the key letters only and not \"auth\" (RFC 7628)", item)
		}
		out[key] = value
	}
	return out, nil
}

// mskMechanism is AWS_MSK_IAM with credentials from the AWS SDK's default
// chain: environment, shared config and credentials files (AWS_PROFILE),
// web identity (EKS IRSA), ECS task roles, EC2 instance roles. The region of
// the signature is the broker's (from its host name) or AWS_REGION.
func mskMechanism() (sasl.Mechanism, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("REDRIVE_KAFKA_SASL_MECHANISM=AWS_MSK_IAM: load the AWS configuration: %w", err)
	}
	creds := cfg.Credentials // a cache: retrieved again only when they expire
	if creds == nil {
		return nil, errors.New("REDRIVE_KAFKA_SASL_MECHANISM=AWS_MSK_IAM: no AWS credentials provider found")
	}
	return aws.ManagedStreamingIAM(func(ctx context.Context) (aws.Auth, error) {
		c, err := creds.Retrieve(ctx)
		if err != nil {
			return aws.Auth{}, fmt.Errorf("kafka AWS_MSK_IAM: AWS credentials: %w", err)
		}
		return aws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken,
			UserAgent: "redrive"}, nil
	}), nil
}

// validateIdentity checks the settings of the configured SASL mechanism.
func (k KafkaSecurity) validateIdentity() []error {
	var errs []error
	switch k.SASLMechanism {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if k.SASLUser == "" {
			errs = append(errs, errors.New("REDRIVE_KAFKA_SASL_USERNAME: required when a SASL mechanism is set"))
		}
	case mechanismOAuth:
		if u, err := url.Parse(k.OAuthTokenURL); k.OAuthTokenURL == "" || err != nil || u.Host == "" ||
			(u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname()))) {
			errs = append(errs, fmt.Errorf("REDRIVE_KAFKA_OAUTH_TOKEN_URL: an https URL of the token endpoint is required with OAUTHBEARER (http only on a loopback host), got %q", k.OAuthTokenURL))
		}
		if k.OAuthClientID == "" || k.OAuthClientSecret == "" {
			errs = append(errs, errors.New("REDRIVE_KAFKA_OAUTH_CLIENT_ID and REDRIVE_KAFKA_OAUTH_CLIENT_SECRET: both required with OAUTHBEARER"))
		}
		if _, err := k.oauthExtensions(); err != nil {
			errs = append(errs, err)
		}
	case mechanismMSK:
		if !k.TLS {
			errs = append(errs, errors.New("REDRIVE_KAFKA_TLS: AWS_MSK_IAM needs TLS (MSK's IAM listener, port 9098, is TLS only): set it to true"))
		}
	}
	return errs
}

func isLoopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}
