// An editor agent for the Go end-to-end tests: the real HocuspocusProvider (of ./v3 or ./v4,
// the first argument) with the `ws` package as the WebSocket, driven over stdin/stdout like
// ../yws/agent.mjs: one JSON request per line, {"id":N,"op":"…",…}; each answer is one line
// {"id":N,"ok":true,"result":…} or {"id":N,"ok":false,"error":"…"}. Requests run
// concurrently. The agent exits when stdin closes.
//
// Sockets (HocuspocusProviderWebsocket) and providers (HocuspocusProvider, each one document)
// have names: providers opened on a named socket share it, as an application's providers do.
import { awarenessOps, serve, waitUntil } from '../agentlib.mjs'

const version = process.argv[2] ?? 'v4'
const { Y, HocuspocusProvider, HocuspocusProviderWebsocket, WebSocket } = await import(`./${version}/deps.mjs`)

const sockets = new Map() // name → { socket, events }
const editors = new Map() // name → { doc, provider, events, token }

function editor (name) {
  const e = editors.get(name)
  if (!e) throw new Error('no editor ' + name)
  return e
}

function newSocket (url, messageReconnectTimeout) {
  const events = []
  const opts = { url, WebSocketPolyfill: WebSocket, maxDelay: 2000 }
  if (messageReconnectTimeout) opts.messageReconnectTimeout = messageReconnectTimeout
  const socket = new HocuspocusProviderWebsocket(opts)
  socket.on('status', ({ status }) => events.push({ type: 'status', status }))
  socket.on('disconnect', ({ event }) => events.push({ type: 'disconnect', code: event?.code ?? 0, reason: event?.reason ?? '' }))
  return { socket, events }
}

const state = (e) => ({
  synced: e.provider.synced,
  unsyncedChanges: e.provider.unsyncedChanges,
  hasUnsyncedChanges: e.provider.hasUnsyncedChanges,
  authenticated: e.provider.isAuthenticated,
  scope: e.provider.authorizedScope ?? ''
})

const ops = {
  ...awarenessOps((name) => editor(name).provider.awareness),
  // socket: a HocuspocusProviderWebsocket that providers may share.
  async socket ({ name, url, messageReconnectTimeout }) {
    sockets.set(name, newSocket(url, messageReconnectTimeout))
    return null
  },
  // open: a provider of document ns (a fresh Y.Doc), on socket (a named one) or alone on url.
  // With wait (default true) it resolves once synced. The token is read at each
  // authentication (setToken changes it).
  async open ({ name, socket, url, ns, token, sessionAwareness, wait = true, timeoutMs, awareness = true }) {
    const doc = new Y.Doc()
    const events = []
    const e = { doc, events, token }
    const config = {
      name: ns,
      document: doc,
      token: () => e.token,
      onAuthenticated: ({ scope }) => events.push({ type: 'authenticated', scope }),
      onAuthenticationFailed: ({ reason }) => events.push({ type: 'authenticationFailed', reason }),
      onClose: ({ event }) => events.push({ type: 'close', code: event?.code ?? 0, reason: event?.reason ?? '' }),
      onStateless: ({ payload }) => events.push({ type: 'stateless', payload }),
      onSynced: ({ state }) => events.push({ type: 'synced', state }),
      onUnsyncedChanges: ({ number }) => events.push({ type: 'unsyncedChanges', number })
    }
    if (!awareness) config.awareness = null
    if (sessionAwareness) config.sessionAwareness = true
    if (socket) {
      config.websocketProvider = sockets.get(socket).socket
    } else {
      config.url = url
      config.WebSocketPolyfill = WebSocket
      config.maxDelay = 2000
    }
    e.provider = new HocuspocusProvider(config)
    if (socket) e.provider.attach()
    editors.set(name, e)
    if (wait) await waitUntil(name + ' synced', timeoutMs, () => e.provider.synced)
    return { clientID: doc.clientID }
  },
  async insert ({ name, index, text }) {
    const t = editor(name).doc.getText('body')
    t.insert(index ?? t.length, text)
    return t.length
  },
  async text ({ name }) { return editor(name).doc.getText('body').toString() },
  async waitText ({ name, text, timeoutMs }) {
    const t = editor(name).doc.getText('body')
    await waitUntil(name + ' text ' + JSON.stringify(text) + ' (has ' + JSON.stringify(t.toString()) + ')', timeoutMs, () => t.toString() === text)
    return null
  },
  async state ({ name }) { return state(editor(name)) },
  // waitSaved: the provider's "saved": synced, and no unsynced change left.
  async waitSaved ({ name, timeoutMs }) {
    const e = editor(name)
    await waitUntil(name + ' saved', timeoutMs, () => e.provider.synced && !e.provider.hasUnsyncedChanges)
    return state(e)
  },
  async setToken ({ name, token }) { editor(name).token = token; return null },
  async sendToken ({ name }) { await editor(name).provider.sendToken(); return null },
  async stateless ({ name, payload }) { editor(name).provider.sendStateless(payload); return null },
  async setAwareness ({ name, state }) { editor(name).provider.setAwarenessField('user', state); return null },
  async events ({ name }) { return editor(name).events },
  async socketEvents ({ name }) { return sockets.get(name).events },
  // waitEvent: the first event of type (and, if given, with the field values of match)
  // after the first `after` events.
  async waitEvent ({ name, type, match, after = 0, timeoutMs }) {
    const e = editor(name)
    return await waitUntil(name + ' ' + type, timeoutMs, () => e.events.slice(after).find((ev) =>
      ev.type === type && Object.entries(match ?? {}).every(([k, v]) => ev[k] === v)))
  },
  async close ({ name }) {
    const e = editor(name)
    e.provider.destroy()
    e.doc.destroy()
    editors.delete(name)
    return null
  },
  async closeSocket ({ name }) {
    sockets.get(name).socket.destroy()
    sockets.delete(name)
    return null
  }
}

serve(ops, () => {
  for (const e of editors.values()) { try { e.provider.destroy() } catch {} }
  for (const s of sockets.values()) { try { s.socket.destroy() } catch {} }
})
