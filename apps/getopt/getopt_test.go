package getopt

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	opts := []Option{Arg('p', "port"), Flag('e', "events"), Flag('c', "chk"), Arg('g', "gid-idx"), Flag(0, "report_gbits")}
	for _, tc := range []struct {
		args     []string
		want     []Opt
		operands []string
		err      bool
	}{
		{args: []string{"-g", "1", "10.0.0.1"}, want: []Opt{{"gid-idx", "1"}}, operands: []string{"10.0.0.1"}},
		{args: []string{"10.0.0.1", "-g1"}, want: []Opt{{"gid-idx", "1"}}, operands: []string{"10.0.0.1"}},
		{args: []string{"-ecg", "2"}, want: []Opt{{"events", ""}, {"chk", ""}, {"gid-idx", "2"}}},
		{args: []string{"--port=9", "--gid", "3", "--report_gbits"}, want: []Opt{{"port", "9"}, {"gid-idx", "3"}, {"report_gbits", ""}}},
		{args: []string{"--", "-e"}, operands: []string{"-e"}},
		{args: []string{"-z"}, err: true},
		{args: []string{"-p"}, err: true},
		{args: []string{"--events=1"}, err: true},
		{args: []string{"--nope"}, err: true},
	} {
		got, ops, err := Parse(tc.args, opts)
		if (err != nil) != tc.err {
			t.Errorf("%q: error %v", tc.args, err)
			continue
		}
		if !tc.err && (!reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(ops, tc.operands)) {
			t.Errorf("%q: got %v %v, want %v %v", tc.args, got, ops, tc.want, tc.operands)
		}
	}
}
