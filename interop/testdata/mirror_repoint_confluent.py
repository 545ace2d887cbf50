# A confluent-kafka (librdkafka) group consumer for the mirror re-pointing
# test (interop/mirror_repoint_test.go).
#
#   mirror_repoint_confluent.py MODE BOOTSTRAP TOPIC GROUP P:OFFSET,...
#
# MODE "source": subscribe from the beginning, read every partition P up to
# OFFSET (exclusive; later records are ignored), then commit OFFSET with the
# leader epoch of the last record read.
# MODE "dest": auto.offset.reset=error, so the group must continue from its
# committed offsets (a reset fails); print the committed offsets as librdkafka
# sees them, read every partition P up to OFFSET (its log end), then poll two
# more seconds: whatever arrives is printed too (a duplicate or a record past
# the end would show).
#
# stdout: "COMMITTED<TAB>p<TAB>offset<TAB>epoch" lines (dest only), then one
# "p<TAB>offset<TAB>epoch<TAB>hex(value)" line per record.
# stderr: librdkafka's log (debug cgrp,topic,fetch), one "RDKAFKA ..." line each.
# Exit 0 done; 3 a consumer error (reset, truncation, ...); 4 timed out.
import logging
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

mode, bootstrap, topic, group, limits = sys.argv[1:6]
want = {}
for item in limits.split(","):
    p, off = item.split(":")
    want[int(p)] = int(off)

log = logging.getLogger("rdkafka")
handler = logging.StreamHandler(sys.stderr)
handler.setFormatter(logging.Formatter("RDKAFKA %(message)s"))
log.addHandler(handler)
log.setLevel(logging.DEBUG)

c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "group.protocol": "classic",
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest" if mode == "source" else "error",
    "enable.partition.eof": False,
    "debug": "cgrp,topic,fetch",
}, logger=log)

committed = {}
if mode == "dest":
    for tp in c.committed([TopicPartition(topic, p) for p in sorted(want)], timeout=30):
        if tp.error:
            sys.exit("committed %s: %s" % (tp, tp.error))
        epoch = -1 if tp.leader_epoch is None else tp.leader_epoch
        print("COMMITTED\t%d\t%d\t%d" % (tp.partition, tp.offset, epoch), flush=True)
        if tp.offset >= 0:
            committed[tp.partition] = tp


assigned = []


def on_assign(consumer, partitions):
    assigned.extend(partitions)


c.subscribe([topic], on_assign=on_assign)
# librdkafka starts at a committed offset without validating it; a seek to
# the same offset with its leader epoch makes it validate the position with
# OffsetForLeaderEpoch before fetching again (KIP-320). Records delivered
# before the seek took effect are not counted; librdkafka drops the ones it
# fetched for the old position.
to_seek = sorted(committed)
reached = {p: False for p in want}
last_epoch = {}
deadline = time.time() + 90
extra_until = None
while True:
    now = time.time()
    if extra_until is None and all(reached.values()):
        if mode == "source":
            break
        extra_until = now + 2
    if extra_until is not None and now >= extra_until:
        break
    if now > deadline:
        print("timed out; reached %s" % reached, file=sys.stderr, flush=True)
        sys.exit(4)
    if to_seek and assigned:
        p = to_seek[0]
        k = committed[p]
        try:
            c.seek(TopicPartition(topic, p, k.offset, leader_epoch=k.leader_epoch))
            print("SEEK %d %d %d" % (p, k.offset, k.leader_epoch), file=sys.stderr, flush=True)
            to_seek.pop(0)
        except KafkaException as e:
            # _STATE: the partition is not fetching yet.
            if e.args[0].code() != KafkaError._STATE:
                raise
    m = c.poll(0.2)
    if m is None:
        continue
    if not m.error() and m.partition() in to_seek:
        continue
    if m.error():
        print("CONSUMER ERROR %s" % m.error(), file=sys.stderr, flush=True)
        sys.exit(3)
    p, off = m.partition(), m.offset()
    if mode == "source" and off >= want[p]:
        continue
    print("%d\t%d\t%d\t%s" % (p, off, m.leader_epoch(), m.value().hex()), flush=True)
    last_epoch[p] = m.leader_epoch()
    if off + 1 >= want[p]:
        reached[p] = True

if mode == "source":
    c.commit(offsets=[TopicPartition(topic, p, want[p], leader_epoch=last_epoch[p]) for p in sorted(want)],
             asynchronous=False)
c.close()
