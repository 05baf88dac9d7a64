// kafkajs (classic protocol only) in a group that migrates to KIP-848's
// consumer protocol, run by broker's TestKafkajsInMigratingGroup: node
// migrate.js HOST:PORT TOPIC GROUP. One kafkajs consumer reads TOPIC in
// GROUP from its beginning and prints a line for every assignment it is
// given ("join [partitions]") and every record ("record VALUE"); the Go
// test adds a consumer-protocol member beside it. When stdin closes, the
// consumer leaves and the last line is "ok".
'use strict'
const { Kafka, logLevel } = require('kafkajs')

const [addr, topic, groupId] = process.argv.slice(2)

async function main () {
  const kafka = new Kafka({ clientId: 'seglog-migrate-test', brokers: [addr], logLevel: logLevel.NOTHING, retry: { retries: 10 } })
  const c = kafka.consumer({ groupId, heartbeatInterval: 100, sessionTimeout: 10000, rebalanceTimeout: 10000, maxWaitTimeInMs: 100 })
  c.on(c.events.GROUP_JOIN, e => {
    const parts = (e.payload.memberAssignment[topic] || []).slice().sort((x, y) => x - y)
    console.log(`join ${JSON.stringify(parts)}`)
  })
  c.on(c.events.CRASH, e => { console.log(`crash ${e.payload.error}`) })
  await c.connect()
  await c.subscribe({ topic, fromBeginning: true })
  await c.run({ eachMessage: async ({ message }) => { console.log(`record ${message.value.toString()}`) } })
  const stdinClosed = new Promise(resolve => {
    process.stdin.on('end', resolve)
    process.stdin.resume()
  })
  await stdinClosed
  await c.disconnect()
  console.log('ok')
}

main().catch(err => {
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
