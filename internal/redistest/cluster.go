package redistest

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// CLIBinary is the name of the Redis command-line program, looked up on PATH; StartCluster runs
// its --cluster create.
const CLIBinary = "redis-cli"

// ClusterReadyTimeout bounds how long StartCluster waits for every node to report cluster_state:ok.
const ClusterReadyTimeout = eventually.Ceiling

// Cluster is a Redis Cluster of masters without replicas, each a Server owned by one test.
type Cluster struct {
	// Nodes are the masters, in the order their slots were assigned.
	Nodes []*Server
}

// StartCluster starts masters cluster nodes (Options.Cluster, and the rest of opts, on each), joins
// them with `redis-cli --cluster create ... --cluster-yes`, which spreads the 16384 hash slots
// evenly, and waits until every node knows every other node and reports cluster_state:ok. It fails
// the test when redis-server or redis-cli is missing or the cluster does not form within
// ClusterReadyTimeout. Each node is stopped when the test ends. Redis Cluster needs at least three
// masters.
func StartCluster(tb testing.TB, masters int, opts Options) *Cluster {
	tb.Helper()
	if masters < 3 {
		tb.Fatalf("redistest: a Redis Cluster needs at least 3 masters, not %d", masters)
		return nil
	}
	cli, err := exec.LookPath(CLIBinary)
	if err != nil {
		tb.Fatalf("redistest: %s not found on PATH: install redis-tools (Debian package redis-tools, a dependency of redis-server): %v", CLIBinary, err)
		return nil
	}
	opts.Cluster = true
	c := &Cluster{}
	for range masters {
		c.Nodes = append(c.Nodes, Start(tb, opts))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if opts.Password != "" {
		args = append(args, "--no-auth-warning", "-a", opts.Password)
	}
	if opts.TLS {
		args = append(args, "--tls", "--cacert", c.Nodes[0].CAFile())
	}
	cmd := exec.Command(cli, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tb.Fatalf("redistest: %s --cluster create: %v\n%s", CLIBinary, err, out.String())
		return nil
	}
	for _, n := range c.Nodes {
		var last string
		ok := eventually.Within(ClusterReadyTimeout, func() bool {
			reply, err := n.do("CLUSTER", "INFO")
			info, _ := reply.(string)
			last = fmt.Sprint(strings.TrimSpace(info), err)
			return err == nil && infoField(info, "cluster_state") == "ok" &&
				infoField(info, "cluster_known_nodes") == fmt.Sprint(masters) &&
				infoField(info, "cluster_slots_ok") == "16384"
		})
		if !ok {
			tb.Fatalf("redistest: cluster node %s not ready after %s: %s%s", n.Addr(), ClusterReadyTimeout, last, n.logTail())
			return nil
		}
	}
	return c
}

// Addrs returns the addresses of the nodes, "127.0.0.1:<port>" each: the seeds of a cluster client.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}
