package main

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestSetupTracing: without an exporter nothing records spans; console installs the SDK; an
// unknown exporter is an error naming the variable. (It sets the global provider: not parallel.)
func TestSetupTracing(t *testing.T) {
	before := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(before) })
	for _, none := range []string{"", "none"} {
		t.Setenv("OTEL_TRACES_EXPORTER", none)
		tp, _, err := setupTracing(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if tp != nil {
			t.Fatalf("OTEL_TRACES_EXPORTER=%q gave a tracer provider", none)
		}
		if _, sdk := otel.GetTracerProvider().(*sdktrace.TracerProvider); sdk {
			t.Fatalf("OTEL_TRACES_EXPORTER=%q installed a recording provider", none)
		}
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	tp, shutdown, err := setupTracing(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, sdk := otel.GetTracerProvider().(*sdktrace.TracerProvider); !sdk || tp != otel.GetTracerProvider() {
		t.Fatal("OTEL_TRACES_EXPORTER=console installed no SDK provider, or returned another one")
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
	if _, _, err := setupTracing(context.Background()); err == nil {
		t.Fatal("an unknown exporter was accepted")
	}
}
