'use strict';
// A minimal payments endpoint behind @aws-lambda-powertools/idempotency 2.35.0 (conformance/,
// issue 29). Powertools makes a Lambda handler idempotent; this file is both the Lambda handler
// and a small stand-in for Amazon API Gateway (an HTTP API, payload format 2.0) in front of it:
// node:http turns each request into an API Gateway event, calls the handler with a Lambda-like
// context, and writes the handler's { statusCode, headers, body } back. Only POST /v1/payments
// goes to the idempotent handler; the count reads and /health are answered by the adapter.
// STORE=redis: the package's CachePersistenceLayer on @redis/client (REDIS_URL required).
// STORE=memory: the same CachePersistenceLayer on an in-process client implementing the
// package's CacheClient interface (get / set with NX and EX / del) over a Map: the package ships
// no in-process persistence layer.
const http = require('node:http');
const crypto = require('node:crypto');
const { makeIdempotent, IdempotencyConfig } = require('@aws-lambda-powertools/idempotency');
const { CachePersistenceLayer } = require('@aws-lambda-powertools/idempotency/cache');

function fail(msg) {
  console.error(`powertools-idempotency server: ${msg}`);
  process.exit(2);
}

const PORT = process.env.PORT;
if (!PORT) fail('PORT is required (PORT=8080 node server.js)');
const STORE = process.env.STORE || 'memory';
if (STORE !== 'memory' && STORE !== 'redis') fail(`STORE must be memory or redis, not ${JSON.stringify(STORE)}`);
if (STORE === 'redis' && !process.env.REDIS_URL) fail('STORE=redis needs REDIS_URL (redis://127.0.0.1:6379)');

// What the Lambda runtime would set; Powertools prefixes its keys with the function name.
const FUNCTION_NAME = 'payments';
process.env.AWS_LAMBDA_FUNCTION_NAME = process.env.AWS_LAMBDA_FUNCTION_NAME || FUNCTION_NAME;
// The function's timeout (a Lambda setting): 30 s, over the 5 s a request may sleep.
const TIMEOUT_MS = 30000;

const payments = new Map(); // id -> payment
let seq = 0;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const json = (statusCode, value) => ({
  statusCode,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(value),
});

// The Lambda handler: an API Gateway event in, an API Gateway response out.
async function createPayment(event, _context) {
  let body;
  try {
    body = JSON.parse(event.body ?? '');
  } catch {
    return json(400, { error: 'the body is not JSON' });
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return json(400, { error: 'the body must be a JSON object' });
  }
  if (typeof body.reference !== 'string' || body.reference === '') {
    return json(400, { error: 'reference is required' });
  }
  if (typeof body.amount !== 'number' || !(body.amount > 0)) {
    return json(400, { error: 'amount must be a positive number' });
  }
  const delay = Math.min(Math.max(Number(body.delay_ms) || 0, 0), 5000);
  if (delay > 0) await sleep(delay);
  seq++;
  const payment = { id: `pay_${seq}`, reference: body.reference, amount: body.amount };
  payments.set(payment.id, payment);
  return json(201, payment);
}

// An in-process CacheClient (the interface CachePersistenceLayer documents: get, set with the
// NX and EX options, del), for the memory row.
class MemoryCacheClient {
  constructor() { this.items = new Map(); }

  #live(name) {
    const item = this.items.get(name);
    if (item && item.expiresAt !== undefined && Date.now() >= item.expiresAt) {
      this.items.delete(name);
      return undefined;
    }
    return item;
  }

  async get(name) {
    const item = this.#live(name);
    return item ? item.value : null;
  }

  async set(name, value, options = {}) {
    if (options.NX && this.#live(name)) return null;
    const expiresAt = options.EX !== undefined ? Date.now() + options.EX * 1000 : undefined;
    this.items.set(name, { value: String(value), expiresAt });
    return 'OK';
  }

  async del(keys) {
    let n = 0;
    for (const k of keys) if (this.items.delete(k)) n++;
    return n;
  }
}

async function makeHandler() {
  let client;
  if (STORE === 'redis') {
    const { createClient } = require('@redis/client');
    client = createClient({ url: process.env.REDIS_URL });
    client.on('error', (err) => console.error('redis client error:', err.message));
    await client.connect();
  } else {
    client = new MemoryCacheClient();
  }
  const persistenceStore = new CachePersistenceLayer({ client });
  // The README's IdempotencyConfig for an API Gateway handler (its Middy example), with one
  // correction: the README's eventKeyJmesPath 'headers.idempotency-key' is not a JMESPath
  // expression Powertools parses (LexerError: unknown token after "-"); the header's name
  // is quoted.
  const config = new IdempotencyConfig({
    hashFunction: 'md5',
    useLocalCache: false,
    expiresAfterSeconds: 3600,
    throwOnNoIdempotencyKey: false,
    eventKeyJmesPath: 'headers."idempotency-key"',
  });
  return makeIdempotent(createPayment, { persistenceStore, config });
}

function lambdaContext() {
  const deadline = Date.now() + TIMEOUT_MS;
  return {
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    functionVersion: '$LATEST',
    awsRequestId: crypto.randomUUID(),
    memoryLimitInMB: '128',
    getRemainingTimeInMillis: () => Math.max(deadline - Date.now(), 0),
  };
}

// The API Gateway HTTP API (payload format 2.0) event for one request: header names in lower
// case, repeated headers joined with commas, the body as a string.
function apiGatewayEvent(req, url, rawBody) {
  const headers = {};
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i].toLowerCase();
    const value = req.rawHeaders[i + 1];
    headers[name] = name in headers ? `${headers[name]},${value}` : value;
  }
  const query = {};
  for (const [k, v] of url.searchParams) query[k] = k in query ? `${query[k]},${v}` : v;
  return {
    version: '2.0',
    routeKey: `${req.method} ${url.pathname}`,
    rawPath: url.pathname,
    rawQueryString: url.search.slice(1),
    headers,
    queryStringParameters: Object.keys(query).length ? query : undefined,
    requestContext: {
      http: { method: req.method, path: url.pathname, protocol: 'HTTP/1.1', sourceIp: req.socket.remoteAddress },
      requestId: crypto.randomUUID(),
      routeKey: `${req.method} ${url.pathname}`,
      stage: '$default',
      timeEpoch: Date.now(),
    },
    body: rawBody,
    isBase64Encoded: false,
  };
}

function send(res, r) {
  res.writeHead(r.statusCode, r.headers || {});
  res.end(r.body ?? '');
}

async function main() {
  const handler = await makeHandler();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      if (req.method === 'GET' && url.pathname === '/health') return send(res, json(200, { status: 'ok' }));
      if (req.method === 'GET' && url.pathname === '/v1/payments/count') return send(res, json(200, { count: payments.size }));
      if (req.method === 'GET' && url.pathname === '/v1/payments') {
        const ref = url.searchParams.get('reference');
        let n = 0;
        for (const p of payments.values()) if (p.reference === ref) n++;
        return send(res, json(200, { count: n }));
      }
      if (req.method !== 'POST' || url.pathname !== '/v1/payments') return send(res, json(404, { message: 'Not Found' }));
      const event = apiGatewayEvent(req, url, Buffer.concat(chunks).toString('utf8'));
      try {
        send(res, await handler(event, lambdaContext()));
      } catch (err) {
        // What API Gateway (HTTP API) answers when the Lambda function fails: the error itself
        // goes to the function's log only.
        console.error(`handler error: ${err && err.name}: ${err && err.message}`);
        send(res, json(500, { message: 'Internal Server Error' }));
      }
    });
  });
  server.listen(Number(PORT), '127.0.0.1', () => {
    console.error(`powertools-idempotency server: listening on 127.0.0.1:${PORT} (store ${STORE})`);
  });
  process.on('SIGTERM', () => {
    server.close();
    process.exit(0);
  });
}

main().catch((err) => fail(err && err.stack ? err.stack : String(err)));
