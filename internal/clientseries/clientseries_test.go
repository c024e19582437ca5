package clientseries

import (
	"reflect"
	"testing"
)

func TestAggregate(t *testing.T) {
	rows := []Row{
		{Group: "u0", Name: "alice", Received: 10, Sent: 1},
		{Group: "u0", Name: "alice", Received: 5, Sent: 2}, // duplicate-cn: summed
		{Group: "u1", Name: "alice", Received: 1, Sent: 1}, // another group: its own key
		{Group: "u0", Name: "UNDEF", Received: 3},
		{Group: "u0", Name: "", Received: 4}, // counted as UNDEF
		{Group: "u0", Name: "bob", Received: 100},
	}
	got := Aggregate(rows, 3)
	want := Result{Rows: []Row{
		{Group: "u0", Name: "bob", Received: 100},
		{Group: "u0", Name: "alice", Received: 15, Sent: 3},
		{Group: "u0", Name: "UNDEF", Received: 7},
	}, Dropped: 1}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Aggregate = %+v, want %+v", got, want)
	}
	if got := Aggregate(rows, 0); len(got.Rows) != 0 || got.Dropped != 4 {
		t.Fatalf("Aggregate(max 0) = %+v, want no rows and 4 dropped", got)
	}
	if got := Aggregate(rows, 10); len(got.Rows) != 4 || got.Dropped != 0 {
		t.Fatalf("Aggregate(max 10) = %+v, want 4 rows, none dropped", got)
	}
}
