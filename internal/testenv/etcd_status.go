package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// etcdHTTPTimeout bounds one request of the readiness and status checks.
const etcdHTTPTimeout = 2 * time.Second

// EtcdMemberStatus is what an etcd member says of itself (the Status RPC).
type EtcdMemberStatus struct {
	MemberID  uint64 `json:"-"`
	Leader    uint64 `json:"leader,string"` // 0: no leader
	RaftTerm  uint64 `json:"raftTerm,string"`
	RaftIndex uint64 `json:"raftIndex,string"`
	Version   string `json:"version"`
}

// EtcdStatus asks the etcd member at addr (host:port) for its status, through its
// JSON gateway with a plain HTTP request, so that it starts no lasting goroutine.
// It is bounded by ctx and by 2s.
func EtcdStatus(ctx context.Context, addr string) (EtcdMemberStatus, error) {
	var st struct {
		Header struct {
			MemberID uint64 `json:"member_id,string"`
		} `json:"header"`
		EtcdMemberStatus
	}
	if err := etcdCall(ctx, addr, "/v3/maintenance/status", &st); err != nil {
		return EtcdMemberStatus{}, err
	}
	st.EtcdMemberStatus.MemberID = st.Header.MemberID
	return st.EtcdMemberStatus, nil
}

// etcdCall POSTs {} to path on the JSON gateway of the etcd at addr and decodes the
// reply into v.
func etcdCall(ctx context.Context, addr, path string, v any) error {
	return etcdPost(ctx, addr, path, struct{}{}, v)
}

// etcdPost POSTs in, as JSON, to path on the JSON gateway of the etcd at addr and
// decodes the reply into out.
func etcdPost(ctx context.Context, addr, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, etcdHTTPTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s%s: %s: %s", addr, path, resp.Status, bytes.TrimSpace(reply))
	}
	if err := json.Unmarshal(reply, out); err != nil {
		return fmt.Errorf("etcd %s%s: %w", addr, path, err)
	}
	return nil
}
