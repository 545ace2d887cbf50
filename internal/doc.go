// Package internal groups helpers shared by the product packages and by
// their tests (testwasm, testkit, testcerts, lograte); each subpackage documents what
// it owns.
// Nothing here is public API.
package internal
