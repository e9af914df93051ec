package rawbench

import (
	"context"
	"os"
	"testing"

	"github.com/redrive/redrive/internal/pgtest"
)

func TestServerCPUCountsTheServersWork(t *testing.T) {
	ctx := context.Background()
	db := &DB{pool: pgtest.New(t)}
	before, err := db.ServerCPU(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// About a CPU-second of a backend's work.
	if _, err := db.Exec(ctx, "SELECT count(*) FROM generate_series(1, 20000000) g WHERE g % 7 = 3"); err != nil {
		t.Fatal(err)
	}
	after, err := db.ServerCPU(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if used := after - before; used < clockTick*5 {
		t.Fatalf("the server used %v for a scan of 20M rows, want at least %v", used, clockTick*5)
	}
}

func TestProcessCPU(t *testing.T) {
	if _, err := ProcessCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, err := ProcessCPU(-1); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}
