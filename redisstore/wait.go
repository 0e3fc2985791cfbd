package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/record"
)

// The operations that Unreplicated.Op names: the writes that Options.WaitReplicas waits for.
const (
	OpCommit      = "commit"
	OpMarkUnknown = "mark_unknown"
)

// Unreplicated describes a Commit or MarkUnknown that Redis applied on the primary, and that the
// store therefore reported as done, but that fewer than Options.WaitReplicas replicas acknowledged
// within Options.WaitTimeout. A failover before the replicas catch up may lose it: the record then
// reads as it was before the write (in_progress, later outcome_unknown; or absent).
type Unreplicated struct {
	// Op is OpCommit or OpMarkUnknown.
	Op string
	// Key is the gateway's key of the record (not the Redis key).
	Key string
	// Acked is how many replicas acknowledged the write, or -1 when it is not known: WAIT's reply
	// was lost (Err says why), or on Redis Cluster the write was redirected to another node, where
	// the store could not send WAIT on the connection that wrote.
	Acked int
	// Want is Options.WaitReplicas.
	Want int
	// Err is why WAIT failed, or nil when WAIT answered with too few replicas.
	Err error
}

// readTimeout returns the socket read timeout of client when the store can know it (a *redis.Client,
// including a Sentinel failover client, or a *redis.ClusterClient), else 0. A negative or zero
// timeout means none.
func readTimeout(client redis.UniversalClient) time.Duration {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ReadTimeout
	case *redis.ClusterClient:
		return c.Options().ReadTimeout
	}
	return 0
}

// runReplicated runs a fencing script like run (pipelined as run says) and, with
// Options.WaitReplicas, sends WAIT after it on the same connection of the client's pool in the
// same round trip, reporting a write that too few replicas acknowledged to OnUnreplicated.
//
// WAIT counts the replicas that acknowledged every write made so far on the connection it is sent
// on, so it must follow the script on that very connection: a pipeline. On Redis Cluster the
// pipeline goes to the node that serves the key's slot (a keyless WAIT would otherwise go to any
// node); if that node redirects (the slot is moving), the script is run again through the cluster
// client, which follows the redirection, and the write's replication is reported unknown.
func (s *Store) runReplicated(ctx context.Context, pipelined bool, op string, script *redis.Script, key string, args ...any) (bool, error) {
	if s.waitReplicas == 0 {
		return s.run(ctx, pipelined, op, script, key, args...)
	}
	rkey := s.redisKey(key)
	var conn redis.Cmdable = s.client
	cluster, isCluster := s.client.(*redis.ClusterClient)
	if isCluster {
		node, err := cluster.MasterForKey(ctx, rkey)
		if err != nil {
			return false, wrap(op, key, err)
		}
		conn = node
	}
	n, acked, waitErr, err := s.evalWait(ctx, conn, script, rkey, args)
	if isCluster && isRedirect(err) {
		// The node did not run the script: it does not serve the slot (any more), or the cluster
		// is down. The cluster client follows redirections and refreshes its slot map.
		n, err = script.Run(ctx, s.client, []string{rkey}, args...).Int64()
		acked, waitErr = -1, nil
	}
	if err != nil {
		return false, wrap(op, key, err)
	}
	if n == 1 && acked < s.waitReplicas && s.onUnreplicated != nil {
		s.onUnreplicated(ctx, Unreplicated{Op: op, Key: key, Acked: acked, Want: s.waitReplicas, Err: waitErr})
	}
	return n == 1, nil
}

// evalWait sends EVALSHA and WAIT in one pipeline on conn, and EVAL and WAIT when the server does
// not know the script yet (NOSCRIPT). It returns the script's integer reply and WAIT's count, or -1
// and WAIT's error when the script ran but WAIT's reply was lost; err is the script's error.
func (s *Store) evalWait(ctx context.Context, conn redis.Cmdable, script *redis.Script, rkey string, args []any) (n int64, acked int, waitErr, err error) {
	eval, wait := s.pipeline(ctx, conn, script.EvalSha, rkey, args)
	if redis.HasErrorPrefix(eval.Err(), "NOSCRIPT") {
		eval, wait = s.pipeline(ctx, conn, script.Eval, rkey, args)
	}
	if n, err = eval.Int64(); err != nil {
		return 0, 0, nil, err
	}
	count, err := wait.Int64()
	if err != nil {
		return n, -1, fmt.Errorf("wait: %w", err), nil
	}
	return n, int(count), nil, nil
}

// pipeline sends the script (through eval: Script.EvalSha or Script.Eval) and WAIT in one pipeline
// on conn, and returns their commands, which hold the replies or errors.
func (s *Store) pipeline(ctx context.Context, conn redis.Cmdable, eval func(context.Context, redis.Scripter, []string, ...any) *redis.Cmd,
	rkey string, args []any) (evalCmd, waitCmd *redis.Cmd) {
	pipe := conn.Pipeline()
	evalCmd = eval(ctx, pipe, []string{rkey}, args...)
	// Pipeliner has no Wait method (WAIT blocks); the generic command sends the same.
	waitCmd = pipe.Do(ctx, "wait", s.waitReplicas, record.Millis(s.waitTimeout))
	_, _ = pipe.Exec(ctx) // the errors are in the commands
	return evalCmd, waitCmd
}

// isRedirect reports whether err is a Redis Cluster error reply after which the node did not run
// the command: MOVED or ASK (another node serves the slot), TRYAGAIN or CLUSTERDOWN.
func isRedirect(err error) bool {
	for _, prefix := range []string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}
