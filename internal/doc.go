// Package internal groups helpers shared by the product packages; each
// subpackage documents what it owns. Nothing here is public API.
package internal
