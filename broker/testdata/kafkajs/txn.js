// kafkajs transactions against seglog serve, run by broker's
// TestKafkajsTransactions: node txn.js HOST:PORT. A transactional producer
// sends and commits (with a group's offsets, sendOffsets), sends and
// aborts; a read_committed consumer sees only the committed records, and
// the group's offsets are those of the committed transaction. Every check
// throws; the last line is "ok".
'use strict'
const assert = require('node:assert/strict')
const { Kafka, logLevel } = require('kafkajs')
const { consumeValues } = require('./consume')

const addr = process.argv[2]
const topic = 'jst'

async function main () {
  const kafka = new Kafka({ clientId: 'seglog-txn-test', brokers: [addr], logLevel: logLevel.NOTHING, retry: { retries: 5 } })
  const admin = kafka.admin()
  await admin.connect()
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 1 }, { topic: 'jst-src', numPartitions: 1 }] }), true)
  const producer = kafka.producer({ transactionalId: 'jst-producer', maxInFlightRequests: 1, idempotent: true })
  await producer.connect()

  const committed = await producer.transaction()
  await committed.send({ topic, messages: [{ value: 'c1' }, { value: 'c2' }] })
  await committed.sendOffsets({ consumerGroupId: 'jst-group', topics: [{ topic: 'jst-src', partitions: [{ partition: 0, offset: '42' }] }] })
  await committed.commit()

  const aborted = await producer.transaction()
  await aborted.send({ topic, messages: [{ value: 'a1' }] })
  await aborted.sendOffsets({ consumerGroupId: 'jst-group', topics: [{ topic: 'jst-src', partitions: [{ partition: 0, offset: '99' }] }] })
  await aborted.abort()

  const last = await producer.transaction()
  await last.send({ topic, messages: [{ value: 'c3' }] })
  await last.commit()
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: 'jst-reader', maxWaitTimeInMs: 100 })
  await consumer.connect()
  assert.deepEqual(await consumeValues(consumer, topic, 3), ['c1', 'c2', 'c3'], 'only the committed records, in order')

  const offsets = await admin.fetchOffsets({ groupId: 'jst-group', topics: ['jst-src'] })
  assert.equal(offsets[0].partitions[0].offset, '42', 'the committed transaction\'s offset, not the aborted one\'s')
  await admin.disconnect()
  console.log('ok')
}

main().catch(err => {
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
