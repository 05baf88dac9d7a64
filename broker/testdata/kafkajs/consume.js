// consumeValues subscribes a connected kafkajs consumer to topic from the
// beginning, runs it until n records arrive, disconnects it and returns
// their values as strings, in arrival order. Shared by the test scripts.
'use strict'

async function consumeValues (consumer, topic, n) {
  await consumer.subscribe({ topic, fromBeginning: true })
  const got = []
  await new Promise((resolve, reject) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value.toString())
        if (got.length >= n) resolve()
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  return got
}

module.exports = { consumeValues }
