// The packages of this directory, for ../agent.mjs and ../golden.mjs: one import point, so
// that the provider and the scripts share one copy of yjs.
export * as Y from 'yjs'
export * as awarenessProtocol from 'y-protocols/awareness'
export * as syncProtocol from 'y-protocols/sync'
export * as encoding from 'lib0/encoding'
export * as decoding from 'lib0/decoding'
export { HocuspocusProvider, HocuspocusProviderWebsocket } from '@hocuspocus/provider'
export { default as WebSocket } from 'ws'
// The server's frame encoder: the golden frames a node sends are checked against it.
export { OutgoingMessage } from '@hocuspocus/server'
