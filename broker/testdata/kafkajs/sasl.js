// kafkajs over SASL_SSL with SCRAM-SHA-256, run by broker's
// TestKafkajsSCRAM: node sasl.js HOST:PORT CA.pem USER PASSWORD. It
// produces and consumes as USER; the same user with a wrong password is
// refused with a SASL authentication error. Every check throws; the last
// line is "ok".
'use strict'
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { Kafka, logLevel } = require('kafkajs')
const { consumeValues } = require('./consume')

const [addr, caFile, user, password] = process.argv.slice(2)
const topic = 'jsscram'

function client (pass) {
  return new Kafka({
    clientId: 'seglog-sasl-test',
    brokers: [addr],
    logLevel: logLevel.NOTHING,
    retry: { retries: 0 },
    ssl: { ca: [fs.readFileSync(caFile, 'utf8')] },
    sasl: { mechanism: 'scram-sha-256', username: user, password: pass }
  })
}

async function main () {
  const kafka = client(password)
  const producer = kafka.producer({ allowAutoTopicCreation: true })
  await producer.connect()
  await producer.send({ topic, messages: [{ value: 's1' }, { value: 's2' }] })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: 'jsscram-group', maxWaitTimeInMs: 100 })
  await consumer.connect()
  assert.deepEqual(await consumeValues(consumer, topic, 2), ['s1', 's2'])

  const bad = client(password + '-wrong').admin()
  await assert.rejects(bad.connect(), (err) => {
    assert.match(String(err.name) + ' ' + String(err.message), /SASL|[Aa]uthentication/)
    return true
  })
  console.log('ok')
}

main().catch((err) => { console.error(err); process.exit(1) })
