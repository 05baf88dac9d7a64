// kafkajs against seglog serve, run by broker's TestKafkajs: node
// kafkajs.js HOST:PORT. The admin client creates a topic of two partitions,
// an idempotent producer sends 1,000 records (half gzip), the admin client
// lists the offsets and the configs, the records are read back by
// partition, and the topic is deleted. kafkajs's consumer is always a group
// consumer (groups come with issue 20), so the reads go through kafkajs's
// own cluster and broker objects: its Fetch encoding and decoding,
// unmodified. Every check throws; the last line is "ok" and a JSON summary.
'use strict'
const assert = require('node:assert/strict')
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const addr = process.argv[2]
const topic = 'js'
const perPartition = 500

async function main () {
  const kafka = new Kafka({ clientId: 'seglog-test', brokers: [addr], logLevel: logLevel.NOTHING, retry: { retries: 3 } })
  const admin = kafka.admin()
  await admin.connect()
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 2, configEntries: [{ name: 'retention.ms', value: '86400000' }] }] }), true)
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] }), false, 'a second create finds it there')
  const meta = await admin.fetchTopicMetadata({ topics: [topic] })
  assert.equal(meta.topics[0].partitions.length, 2)

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false })
  await producer.connect()
  for (let batch = 0; batch < 10; batch++) {
    const messages = []
    for (let i = 0; i < 100; i++) {
      const n = batch * 100 + i
      messages.push({ key: `k${n}`, value: `value ${n}`, partition: n % 2, headers: { n: String(n) } })
    }
    const sent = await producer.send({ topic, messages, acks: -1, compression: batch % 2 ? CompressionTypes.GZIP : CompressionTypes.None })
    for (const r of sent) assert.equal(r.errorCode, 0)
  }
  await producer.disconnect()

  const offsets = await admin.fetchTopicOffsets(topic)
  for (const o of offsets) {
    assert.equal(o.low, '0')
    assert.equal(o.high, String(perPartition), `partition ${o.partition}`)
  }
  const described = await admin.describeConfigs({ resources: [{ type: 2, name: topic }], includeSynonyms: false })
  const retention = described.resources[0].configEntries.find(c => c.configName === 'retention.ms')
  assert.equal(retention.configValue, '86400000')

  // Read each partition from offset 0 with kafkajs's own Fetch.
  const createCluster = Object.getOwnPropertySymbols(kafka).find(s => s.description === 'private:Kafka:createCluster')
  const cluster = kafka[createCluster]({ allowAutoTopicCreation: false })
  await cluster.connect()
  await cluster.addTargetTopic(topic)
  const leaders = cluster.findLeaderForPartitions(topic, [0, 1])
  const got = { 0: [], 1: [] }
  for (const [nodeId, partitions] of Object.entries(leaders)) {
    const broker = await cluster.findBroker({ nodeId })
    const next = Object.fromEntries(partitions.map(p => [p, 0]))
    while (partitions.some(p => got[p].length < perPartition)) {
      const resp = await broker.fetch({
        replicaId: -1,
        isolationLevel: 1,
        maxWaitTime: 100,
        minBytes: 1,
        maxBytes: 1 << 20,
        topics: [{ topic, partitions: partitions.map(p => ({ partition: p, fetchOffset: String(next[p]), maxBytes: 64 << 10 })) }]
      })
      for (const t of resp.responses) {
        for (const p of t.partitions) {
          assert.equal(p.errorCode, 0)
          for (const m of p.messages) {
            if (Number(m.offset) < next[p.partition]) continue // the whole batch of a fetch from its middle
            got[p.partition].push(m)
            next[p.partition] = Number(m.offset) + 1
          }
        }
      }
    }
  }
  await cluster.disconnect()
  for (const p of [0, 1]) {
    assert.equal(got[p].length, perPartition)
    got[p].forEach((m, i) => {
      const n = i * 2 + p
      assert.equal(Number(m.offset), i)
      assert.equal(m.key.toString(), `k${n}`)
      assert.equal(m.value.toString(), `value ${n}`)
      assert.equal(m.headers.n.toString(), String(n))
    })
  }

  await admin.deleteTopics({ topics: [topic] })
  const after = await admin.listTopics()
  assert.ok(!after.includes(topic), 'deleted')
  await admin.disconnect()
  console.log('ok')
  console.log(JSON.stringify({ produced: perPartition * 2, consumed: got[0].length + got[1].length }))
}

main().catch(err => {
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
