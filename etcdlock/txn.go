package etcdlock

import (
	"context"
	"errors"
	"reflect"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// The transactions of TryLock and Unlock, the calls of every TryLock+Unlock pair,
// are built as etcd's request messages in one allocation each and sent on the
// client's connection (pb.KVClient) instead of through clientv3.KV's builder
// (clientv3.Compare, OpPut, Txn().If().Then()). The request on the wire is the same, and so is the path through
// the client's gRPC interceptors (its retries, its API version header) and call
// options: clientv3.KV adds nothing else to a Txn. A client whose KV is not
// clientv3's own (a namespace.KV, a leasing KV, a mock), or that has no
// connection, keeps clientv3.KV.

// A directKV sends Txns on the client's connection, with the client's call
// options; nil when the client's KV must be used.
type directKV struct {
	kv       pb.KVClient
	callOpts []grpc.CallOption
}

// newDirectKV returns the directKV of client, whose call options are callOpts,
// or nil when its KV is not clientv3's own or it has no connection.
func newDirectKV(client *clientv3.Client, callOpts []grpc.CallOption) *directKV {
	conn := client.ActiveConnection()
	if conn == nil || client.KV == nil || reflect.TypeOf(client.KV) != kvType {
		return nil
	}
	return &directKV{kv: pb.NewKVClient(conn), callOpts: callOpts}
}

// clientCallOpts returns the call options that clientv3 sends its requests with
// (wait for ready, message size limits), which it does not export: a KV on a
// recorder reads them, with no I/O.
func clientCallOpts(client *clientv3.Client) []grpc.CallOption {
	var rec optsRecorder
	_, _ = clientv3.NewKVFromKVClient(&rec, client).Txn(context.Background()).Commit()
	return rec.opts
}

// kvType is the type of clientv3's own KV, which clientv3.New gives a client.
var kvType = reflect.TypeOf(clientv3.NewKVFromKVClient(nil, nil))

// optsRecorder is a pb.KVClient that records the call options of a Txn and sends
// nothing.
type optsRecorder struct {
	pb.KVClient // nil: only Txn is called
	opts        []grpc.CallOption
}

var errRecorded = errors.New("etcdlock: call options recorded")

func (r *optsRecorder) Txn(_ context.Context, _ *pb.TxnRequest, opts ...grpc.CallOption) (*pb.TxnResponse, error) {
	r.opts = append([]grpc.CallOption(nil), opts...)
	return nil, errRecorded
}

// txn sends req, as clientv3.KV's Txn().Commit() does.
func (d *directKV) txn(ctx context.Context, req *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	resp, err := d.kv.Txn(ctx, req, d.callOpts...)
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	return (*clientv3.TxnResponse)(resp), nil
}

// A createTxn is TryLock's transaction, in one allocation: if the key k does not
// exist (create revision 0), put value on the lease; else get k.
type createTxn struct {
	req   pb.TxnRequest
	cmps  [1]*pb.Compare
	cmp   pb.Compare
	rev   pb.Compare_CreateRevision
	then  [1]*pb.RequestOp
	putOp pb.RequestOp
	putU  pb.RequestOp_RequestPut
	put   pb.PutRequest
	els   [1]*pb.RequestOp
	getOp pb.RequestOp
	getU  pb.RequestOp_RequestRange
	get   pb.RangeRequest
}

// newCreateTxn returns the request of clientv3's
//
//	Txn(ctx).If(Compare(CreateRevision(k), "=", 0)).
//		Then(OpPut(k, value, WithLease(lease))).Else(OpGet(k))
func newCreateTxn(k, value []byte, lease clientv3.LeaseID) *pb.TxnRequest {
	t := &createTxn{}
	t.rev.CreateRevision = 0
	t.cmp = pb.Compare{Result: pb.Compare_EQUAL, Target: pb.Compare_CREATE, Key: k, TargetUnion: &t.rev}
	t.cmps[0] = &t.cmp
	t.put = pb.PutRequest{Key: k, Value: value, Lease: int64(lease)}
	t.putU.RequestPut = &t.put
	t.putOp.Request = &t.putU
	t.then[0] = &t.putOp
	t.get = pb.RangeRequest{Key: k}
	t.getU.RequestRange = &t.get
	t.getOp.Request = &t.getU
	t.els[0] = &t.getOp
	t.req = pb.TxnRequest{Compare: t.cmps[:], Success: t.then[:], Failure: t.els[:]}
	return &t.req
}

// A deleteTxn is Unlock's transaction of an acquisition the Locker recorded, in
// one allocation: if the key k has the mod revision rev, delete it.
type deleteTxn struct {
	req   pb.TxnRequest
	cmps  [1]*pb.Compare
	cmp   pb.Compare
	rev   pb.Compare_ModRevision
	then  [1]*pb.RequestOp
	delOp pb.RequestOp
	delU  pb.RequestOp_RequestDeleteRange
	del   pb.DeleteRangeRequest
}

// newDeleteTxn returns the request of clientv3's
//
//	Txn(ctx).If(Compare(ModRevision(k), "=", rev)).Then(OpDelete(k))
func newDeleteTxn(k []byte, rev int64) *pb.TxnRequest {
	t := &deleteTxn{}
	t.rev.ModRevision = rev
	t.cmp = pb.Compare{Result: pb.Compare_EQUAL, Target: pb.Compare_MOD, Key: k, TargetUnion: &t.rev}
	t.cmps[0] = &t.cmp
	t.del = pb.DeleteRangeRequest{Key: k}
	t.delU.RequestDeleteRange = &t.del
	t.delOp.Request = &t.delU
	t.then[0] = &t.delOp
	t.req = pb.TxnRequest{Compare: t.cmps[:], Success: t.then[:]}
	return &t.req
}

// createKey runs TryLock's transaction: put value on the key k, with the lease
// id, if k does not exist; else get k.
func (l *Locker) createKey(ctx context.Context, k, value []byte, id clientv3.LeaseID) (*clientv3.TxnResponse, error) {
	if l.direct != nil {
		return l.direct.txn(ctx, newCreateTxn(k, value, id))
	}
	ks := string(k)
	return l.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(ks), "=", 0)).
		Then(clientv3.OpPut(ks, string(value), clientv3.WithLease(id))).
		Else(clientv3.OpGet(ks)).
		Commit()
}

// deleteKey runs Unlock's transaction of an acquisition that the Locker recorded
// (its create revision fence, its lease h): delete the key k if it is still
// that acquisition's, on h. When the Locker knows the revision of the put that
// put the key on h (h.rev) it compares only the key's mod revision with it (one
// comparison, one read on the server, less): the key has that mod revision
// exactly while no write changed it since, so it is that put's key, created at
// fence (TryLock's put, or a move of the key that kept it), on h. Else it
// compares the create revision and the lease.
func (l *Locker) deleteKey(ctx context.Context, k string, fence int64, h leaseInfo) (*clientv3.TxnResponse, error) {
	if h.rev != 0 && l.direct != nil {
		return l.direct.txn(ctx, newDeleteTxn([]byte(k), h.rev))
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", fence),
		clientv3.Compare(clientv3.LeaseValue(k), "=", h.id)}
	if h.rev != 0 {
		cmps = []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(k), "=", h.rev)}
	}
	return l.client.Txn(ctx).If(cmps...).Then(clientv3.OpDelete(k)).Commit()
}
