'use strict';
// A minimal payments endpoint behind express-idempotency 1.0.6 (conformance/, issue 29).
// The middleware guards POST /v1/payments only; every other route is outside it.
// STORE=memory (the middleware's default in-memory adapter) or STORE=redis
// (express-idempotency-redis-adapter, REDIS_URL required).
const express = require('express');
const idempotency = require('express-idempotency');

function fail(msg) {
  console.error(`express-idempotency server: ${msg}`);
  process.exit(2);
}

const PORT = process.env.PORT;
if (!PORT) fail('PORT is required (PORT=8080 node server.js)');
const STORE = process.env.STORE || 'memory';
if (STORE !== 'memory' && STORE !== 'redis') fail(`STORE must be memory or redis, not ${JSON.stringify(STORE)}`);

const payments = new Map(); // id -> payment
let seq = 0;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  let dataAdapter; // undefined: the middleware's default InMemoryDataAdapter
  if (STORE === 'redis') {
    if (!process.env.REDIS_URL) fail('STORE=redis needs REDIS_URL (redis://127.0.0.1:6379)');
    const RedisAdapter = require('express-idempotency-redis-adapter').default;
    // As the adapter's README shows; ttl left at its default (86400 s).
    dataAdapter = new RedisAdapter({ connectionConfig: { url: process.env.REDIS_URL } });
    await dataAdapter.connect();
  }

  const app = express();
  app.use(express.json());

  app.get('/health', (req, res) => res.json({ status: 'ok' }));
  app.get('/v1/payments/count', (req, res) => res.json({ count: payments.size }));
  app.get('/v1/payments', (req, res) => {
    const ref = req.query.reference;
    let n = 0;
    for (const p of payments.values()) if (p.reference === ref) n++;
    res.json({ count: n });
  });

  app.post('/v1/payments', idempotency.idempotency({ dataAdapter }), async (req, res) => {
    // As the README says: the middleware calls next() on a replay too; isHit tells.
    const service = idempotency.getSharedIdempotencyService();
    if (service.isHit(req)) return;

    const body = req.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      return res.status(400).json({ error: 'the body must be a JSON object' });
    }
    if (typeof body.reference !== 'string' || body.reference === '') {
      return res.status(400).json({ error: 'reference is required' });
    }
    if (typeof body.amount !== 'number' || !(body.amount > 0)) {
      return res.status(400).json({ error: 'amount must be a positive number' });
    }
    const delay = Math.min(Math.max(Number(body.delay_ms) || 0, 0), 5000);
    if (delay > 0) await sleep(delay);
    seq++;
    const payment = { id: `pay_${seq}`, reference: body.reference, amount: body.amount };
    payments.set(payment.id, payment);
    res.status(201).json(payment);
  });

  // Errors (a body that is not JSON; the middleware's conflict and misuse errors, which it
  // passes to next(err) after setting the status) answered as JSON with the status Express's
  // own final handler would choose: err.status, else the response's status if it is 4xx/5xx.
  // eslint-disable-next-line no-unused-vars
  app.use((err, req, res, next) => {
    let status = err.status || err.statusCode;
    if (!status) status = res.statusCode >= 400 ? res.statusCode : 500;
    if (res.headersSent) return;
    res.status(status).json({ error: err.message || 'error' });
  });

  const server = app.listen(Number(PORT), '127.0.0.1', () => {
    console.error(`express-idempotency server: listening on 127.0.0.1:${PORT} (store ${STORE})`);
  });
  process.on('SIGTERM', () => {
    server.close();
    process.exit(0);
  });
}

main().catch((err) => fail(err && err.stack ? err.stack : String(err)));
