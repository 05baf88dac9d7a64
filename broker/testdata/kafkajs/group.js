// kafkajs consumer groups against seglog serve, run by broker's
// TestKafkajsConsumerGroup: node group.js HOST:PORT. Two consumers of one
// group share a topic of two partitions; when one leaves, the other gets
// both and consumes what is produced next; the group's committed offsets
// end at the log end. Every check throws; the last line is "ok" and a JSON
// summary.
'use strict'
const assert = require('node:assert/strict')
const { Kafka, logLevel } = require('kafkajs')

const addr = process.argv[2]
const topic = 'jsg'
const groupId = 'jsg-group'

function deferred () {
  let resolve
  const promise = new Promise(r => { resolve = r })
  return { promise, resolve }
}

async function main () {
  const kafka = new Kafka({ clientId: 'seglog-group-test', brokers: [addr], logLevel: logLevel.NOTHING, retry: { retries: 5 } })
  const admin = kafka.admin()
  await admin.connect()
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] }), true)
  const producer = kafka.producer()
  await producer.connect()
  const send = async (from, n) => {
    const messages = []
    for (let i = from; i < from + n; i++) messages.push({ value: `m${i}`, partition: i % 2 })
    await producer.send({ topic, messages, acks: -1 })
  }
  await send(0, 200)

  const seen = new Set()
  let waiting = null
  const wanted = n => { waiting = { n, d: deferred() }; check(); return waiting.d.promise }
  const check = () => { if (waiting && seen.size >= waiting.n) waiting.d.resolve() }
  const joins = { a: [], b: [] }
  const joined = { a: deferred(), b: deferred() }
  const consumer = name => {
    const c = kafka.consumer({ groupId, heartbeatInterval: 100, sessionTimeout: 10000, rebalanceTimeout: 10000, maxWaitTimeInMs: 100 })
    c.on(c.events.GROUP_JOIN, e => {
      const parts = (e.payload.memberAssignment[topic] || []).slice().sort()
      joins[name].push(parts)
      joined[name].resolve(parts)
      joined[name] = deferred()
      joined[name].last = parts
    })
    return c
  }
  const run = async (c) => {
    await c.connect()
    await c.subscribe({ topic, fromBeginning: true })
    await c.run({ eachMessage: async ({ message }) => { seen.add(message.value.toString()); check() } })
  }
  const a = consumer('a')
  const b = consumer('b')
  const aFirst = joined.a.promise
  await run(a)
  assert.deepEqual(await aFirst, [0, 1], 'alone, a has both partitions')
  await wanted(200)

  const aSecond = joined.a.promise
  const bFirst = joined.b.promise
  await run(b)
  const [pa, pb] = await Promise.all([aSecond, bFirst])
  assert.equal(pa.length, 1, `a and b share the partitions: ${pa} ${pb}`)
  assert.equal(pb.length, 1)
  assert.notDeepEqual(pa, pb)
  const described = await admin.describeGroups([groupId])
  assert.equal(described.groups[0].state, 'Stable')
  assert.equal(described.groups[0].members.length, 2)

  const aThird = joined.a.promise
  await b.disconnect() // leaves the group
  assert.deepEqual(await aThird, [0, 1], 'after b left, a has both')
  await send(200, 100)
  await wanted(300)
  await a.disconnect() // commits, then leaves

  const committed = await admin.fetchOffsets({ groupId, topics: [topic] })
  const total = committed[0].partitions.reduce((s, p) => s + Number(p.offset), 0)
  assert.equal(total, 300, JSON.stringify(committed))
  const groups = await admin.listGroups()
  assert.ok(groups.groups.some(g => g.groupId === groupId))
  await admin.deleteGroups([groupId])
  assert.ok(!(await admin.listGroups()).groups.some(g => g.groupId === groupId), 'deleted')
  await producer.disconnect()
  await admin.disconnect()
  console.log('ok')
  console.log(JSON.stringify({ consumed: seen.size, joinsA: joins.a.length, joinsB: joins.b.length }))
}

main().catch(err => {
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
