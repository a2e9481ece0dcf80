// An editor agent for the Go end-to-end tests: stock y-websocket 3.x WebsocketProvider
// editors (with the `ws` package as the WebSocket) — and the signed tokens an application's
// server mints for them with the `jose` package — driven over stdin/stdout, one JSON
// request per line, {"id":N,"op":"…",…}; each answer is one line {"id":N,"ok":true,
// "result":…} or {"id":N,"ok":false,"error":"…"}. Requests run concurrently (a wait does
// not block the next request). The agent exits when stdin closes.
import * as Y from 'yjs'
import { WebsocketProvider } from 'y-websocket'
import WebSocket from 'ws'
import * as jose from 'jose'
import * as readline from 'node:readline'

const editors = new Map() // name → { doc, provider, events }

// y-websocket reports auth PermissionDenied with console.warn("Permission denied to access
// URL.\nREASON"): record it on the editor whose URL it names.
const warn = console.warn
console.warn = (...args) => {
  const msg = String(args[0] ?? '')
  if (msg.startsWith('Permission denied to access ')) {
    for (const e of editors.values()) {
      if (msg.startsWith('Permission denied to access ' + e.provider.url + '.')) {
        e.events.push({ type: 'permission-denied', reason: msg.split('\n').slice(1).join('\n') })
      }
    }
    return
  }
  warn(...args)
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function waitUntil (what, timeoutMs, cond) {
  const deadline = Date.now() + (timeoutMs ?? 20000)
  for (;;) {
    const v = cond()
    if (v) return v
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what)
    await sleep(10)
  }
}

function editor (name) {
  const e = editors.get(name)
  if (!e) throw new Error('no editor ' + name)
  return e
}

const ops = {
  // open: a new editor (a fresh Y.Doc) on url/ns; with wait (default true) it resolves once
  // synced. token goes as ?token= unless bearer is set (then an Authorization header).
  async open ({ name, url, ns, token, bearer, wait = true, timeoutMs }) {
    const doc = new Y.Doc()
    const events = []
    const params = token && !bearer ? { token } : {}
    class WS extends WebSocket {
      constructor (address, protocols) {
        super(address, protocols, bearer ? { headers: { Authorization: 'Bearer ' + token } } : {})
        // Listening for the refusal takes over ending the handshake from ws: once the body
        // is read, terminate() fails the connection as ws would (error, then close 1006),
        // so the provider reconnects after a refused upgrade as it does in a browser.
        this.on('unexpected-response', (_req, res) => {
          let body = ''
          res.on('data', (c) => { body += c })
          res.on('end', () => {
            events.push({ type: 'refused', status: res.statusCode, body })
            this.terminate()
          })
        })
      }
    }
    const provider = new WebsocketProvider(url, ns, doc, { params, WebSocketPolyfill: WS, disableBc: true })
    provider.on('connection-close', (ev) => { if (ev) events.push({ type: 'close', code: ev.code, reason: ev.reason }) })
    provider.on('closed', (ev) => events.push({ type: 'closed', code: ev.code, reason: ev.reason }))
    editors.set(name, { doc, provider, events })
    if (wait) await waitUntil(name + ' synced', timeoutMs, () => provider.synced)
    return { clientID: doc.clientID }
  },
  async insert ({ name, index, text }) {
    const t = editor(name).doc.getText('body')
    t.insert(index ?? t.length, text)
    return t.length
  },
  async setMeta ({ name, key, value }) {
    editor(name).doc.getMap('meta').set(key, value)
    return null
  },
  async text ({ name }) { return editor(name).doc.getText('body').toString() },
  async waitText ({ name, text, timeoutMs }) {
    const t = editor(name).doc.getText('body')
    await waitUntil(name + ' text', timeoutMs, () => t.toString() === text)
    return null
  },
  async waitLength ({ name, length, timeoutMs }) {
    const t = editor(name).doc.getText('body')
    await waitUntil(name + ' text length ' + length, timeoutMs, () => t.length === length)
    return t.toString().length
  },
  async synced ({ name, timeoutMs }) {
    const p = editor(name).provider
    await waitUntil(name + ' synced', timeoutMs, () => p.synced)
    return null
  },
  async setAwareness ({ name, state }) {
    editor(name).provider.awareness.setLocalState(state)
    return null
  },
  async states ({ name }) {
    const out = []
    editor(name).provider.awareness.getStates().forEach((state, clientID) => out.push({ clientID, state }))
    return out
  },
  async events ({ name }) { return editor(name).events },
  async waitEvent ({ name, type, timeoutMs }) {
    const e = editor(name)
    return await waitUntil(name + ' ' + type, timeoutMs, () => e.events.find((ev) => ev.type === type))
  },
  // mint: a signed token (JWT) made with jose as an application's server would: alg, the
  // key (a private JWK, or secret: the HS256 secret as a string), kid, and the claims;
  // expiresIn (e.g. '1h', '3s') sets exp and iat unless the claims give them.
  async mint ({ alg, jwk, secret, kid, claims, expiresIn }) {
    const key = secret !== undefined ? new TextEncoder().encode(secret) : await jose.importJWK(jwk, alg)
    const header = { alg, typ: 'JWT' }
    if (kid) header.kid = kid
    const jwt = new jose.SignJWT(claims).setProtectedHeader(header)
    if (claims.iat === undefined) jwt.setIssuedAt()
    if (claims.exp === undefined && expiresIn) jwt.setExpirationTime(expiresIn)
    return await jwt.sign(key)
  },
  // retoken: what an application does when the node closed its editor with 4401 (its token
  // expired or was revoked): the provider gets a fresh token and connects again; it
  // resolves once synced.
  async retoken ({ name, token, timeoutMs }) {
    const e = editor(name)
    e.provider.params = { ...e.provider.params, token }
    e.provider.connect()
    await waitUntil(name + ' synced again', timeoutMs, () => e.provider.wsconnected && e.provider.synced)
    return null
  },
  async close ({ name }) {
    const e = editor(name)
    e.provider.destroy()
    e.doc.destroy()
    editors.delete(name)
    return null
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
const reply = (obj) => process.stdout.write(JSON.stringify(obj) + '\n')
rl.on('line', (line) => {
  if (!line.trim()) return
  let req
  try { req = JSON.parse(line) } catch (err) { reply({ id: 0, ok: false, error: 'bad request: ' + err.message }); return }
  const fn = ops[req.op]
  if (!fn) { reply({ id: req.id, ok: false, error: 'unknown op ' + req.op }); return }
  fn(req).then((result) => reply({ id: req.id, ok: true, result }), (err) => reply({ id: req.id, ok: false, error: String(err && err.message || err) }))
})
rl.on('close', () => {
  for (const e of editors.values()) { try { e.provider.destroy() } catch {} }
  process.exit(0)
})
