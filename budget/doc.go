// Package budget owns the byte semaphores that bound the broker's memory:
// request frames in flight (per connection, per peer address, per broker),
// decompression working memory, and batches read for timestamp lookups.
// A Budget only counts; it never allocates the bytes it accounts for, and
// it must not import anything of the broker's (it is a leaf, used by
// hotpath, storage and broker alike).
package budget
