package redlockotel_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/redlockotel"
)

// labels is every sentinel error of package redlock and its label. The
// test below reads the package's source, so a sentinel added there without
// a line here (and in Result) fails it.
var labels = map[string]struct {
	err   error
	label string
}{
	"ErrLocked":             {redlock.ErrLocked, "locked"},
	"ErrUnavailable":        {redlock.ErrUnavailable, "unavailable"},
	"ErrNoValidity":         {redlock.ErrNoValidity, "no_validity"},
	"ErrExpired":            {redlock.ErrExpired, "expired"},
	"ErrReleased":           {redlock.ErrReleased, "expired"},
	"ErrSuperseded":         {redlock.ErrSuperseded, "superseded"},
	"ErrAmnesia":            {redlock.ErrAmnesia, "amnesia"},
	"ErrNotProvisioned":     {redlock.ErrNotProvisioned, "not_provisioned"},
	"ErrRepairTooSoon":      {redlock.ErrRepairTooSoon, "repair_too_soon"},
	"ErrTokenRange":         {redlock.ErrTokenRange, "token_range"},
	"ErrNodeIDConflict":     {redlock.ErrNodeIDConflict, "node_id_conflict"},
	"ErrWrongNodeList":      {redlock.ErrWrongNodeList, "wrong_node_list"},
	"ErrWrongType":          {redlock.ErrWrongType, "wrong_type"},
	"ErrAuth":               {redlock.ErrAuth, "auth"},
	"ErrNoPermission":       {redlock.ErrNoPermission, "no_permission"},
	"ErrScript":             {redlock.ErrScript, "script"},
	"ErrLockLost":           {redlock.ErrLockLost, "lock_lost"},
	"ErrNodeTimeout":        {redlock.ErrNodeTimeout, "node_timeout"},
	"ErrNodeHung":           {redlock.ErrNodeHung, "node_hung"},
	"ErrBadNode":            {redlock.ErrBadNode, "bad_node"},
	"ErrEmptyName":          {redlock.ErrEmptyName, "bad_name"},
	"ErrNameTooLong":        {redlock.ErrNameTooLong, "bad_name"},
	"ErrBadName":            {redlock.ErrBadName, "bad_name"},
	"ErrClosed":             {redlock.ErrClosed, "closed"},
	"ErrNoNodes":            {redlock.ErrNoNodes, "bad_config"},
	"ErrNilNode":            {redlock.ErrNilNode, "bad_config"},
	"ErrDuplicateNode":      {redlock.ErrDuplicateNode, "bad_config"},
	"ErrTTLTooShort":        {redlock.ErrTTLTooShort, "bad_config"},
	"ErrBadDriftFactor":     {redlock.ErrBadDriftFactor, "bad_config"},
	"ErrBadNodeTimeout":     {redlock.ErrBadNodeTimeout, "bad_config"},
	"ErrNoValidityBudget":   {redlock.ErrNoValidityBudget, "bad_config"},
	"ErrBadRetryDelay":      {redlock.ErrBadRetryDelay, "bad_config"},
	"ErrBadMaxOutage":       {redlock.ErrBadMaxOutage, "bad_config"},
	"ErrRetentionTooShort":  {redlock.ErrRetentionTooShort, "bad_config"},
	"ErrTooManyNodes":       {redlock.ErrTooManyNodes, "bad_config"},
	"ErrFencingNode":        {redlock.ErrFencingNode, "bad_config"},
	"ErrBadKeyPrefix":       {redlock.ErrBadKeyPrefix, "bad_config"},
	"ErrTTLTooLong":         {redlock.ErrTTLTooLong, "bad_config"},
	"ErrNilOption":          {redlock.ErrNilOption, "bad_config"},
	"ErrNilFunc":            {redlock.ErrNilFunc, "bad_input"},
	"ErrPermits":            {redlock.ErrPermits, "permits"},
	"ErrHeldByContext":      {redlock.ErrHeldByContext, "held_by_context"},
	"ErrCannotReenter":      {redlock.ErrCannotReenter, "bad_input"},
	"ErrNoLeader":           {redlock.ErrNoLeader, "no_leader"},
	"ErrNotLeader":          {redlock.ErrNotLeader, "not_leader"},
	"ErrResigned":           {redlock.ErrResigned, "resigned"},
	"ErrUpgrade":            {redlock.ErrUpgrade, "upgrade"},
	"ErrReadUnderWrite":     {redlock.ErrReadUnderWrite, "read_under_write"},
	"ErrBadID":              {redlock.ErrBadID, "bad_input"},
	"ErrSpansSlots":         {redlock.ErrSpansSlots, "bad_config"},
	"ErrNotForExtend":       {redlock.ErrNotForExtend, "bad_input"},
	"ErrBadPermits":         {redlock.ErrBadPermits, "bad_input"},
	"ErrDowngradeReentered": {redlock.ErrDowngradeReentered, "bad_input"},
	"ErrNoNames":            {redlock.ErrNoNames, "bad_name"},
	"ErrTooManyNames":       {redlock.ErrTooManyNames, "bad_name"},
	"ErrDuplicateName":      {redlock.ErrDuplicateName, "bad_name"},
}

// sentinels lists the exported package-level Err* variables declared in
// the non-test Go files of package redlock (this module's parent
// directory, through the replace directive).
func sentinels(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no source of package redlock beside this module: %v", err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if file.Name.Name != "redlock" {
			continue
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, name := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(name.Name, "Err") && name.IsExported() {
						names = append(names, name.Name)
					}
				}
			}
		}
	}
	return names
}

func TestEverySentinelHasALabel(t *testing.T) {
	names := sentinels(t)
	if !slices.Contains(names, "ErrLocked") || len(names) < 30 {
		t.Fatalf("parsed only %d sentinels: %v", len(names), names)
	}
	for _, name := range names {
		l, ok := labels[name]
		if !ok {
			t.Errorf("redlock.%s has no label: add it to Result's table and to this test", name)
			continue
		}
		if got := redlockotel.Result(l.err); got != l.label {
			t.Errorf("Result(redlock.%s) = %q, want %q", name, got, l.label)
		}
		// As operations return them: the Kind of a QuorumError.
		if got := redlockotel.Result(&redlock.QuorumError{Op: "lock", Kind: l.err}); got != l.label {
			t.Errorf("Result(QuorumError{Kind: redlock.%s}) = %q, want %q", name, got, l.label)
		}
	}
	for name := range labels {
		if !slices.Contains(names, name) {
			t.Errorf("labels lists %s, which package redlock no longer declares", name)
		}
	}
}
