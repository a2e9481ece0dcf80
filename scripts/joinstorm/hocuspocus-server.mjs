// The Hocuspocus server of the join storm: @hocuspocus/server with its defaults, in memory
// (no extensions), on 127.0.0.1:$PORT.
import { Server } from '@hocuspocus/server'

const server = new Server({ port: Number(process.env.PORT), address: '127.0.0.1', quiet: true, stopOnSignals: true })
await server.listen()
console.log(`hocuspocus listening on 127.0.0.1:${process.env.PORT}`)
