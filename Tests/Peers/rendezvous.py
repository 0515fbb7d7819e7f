"""A rendezvous server for voice-chat tests across NATs: the application's own channel that the
voice chat service's client uses for signalling (and, as a fallback, real-time data). Clients
connect over TCP and exchange frames:

    kind (1 byte) | name length (1) | name (UTF-8) | payload length (2, big-endian) | payload

kind 0 hello (name: the client's own), 1 signalling, 2 real-time (name: the destination on the
way in, the sender on the way out), 3 present (sent by the server: name is a client that is
connected). Frames for a name not connected are dropped.

    python rendezvous.py --host 10.201.0.1 --port 7000 --seconds 30
"""
import argparse
import asyncio
import struct

clients = {}


def frame(kind, name, payload=b""):
    encoded = name.encode()
    return bytes([kind, len(encoded)]) + encoded + struct.pack(">H", len(payload)) + payload


async def read_frame(reader):
    kind, length = await reader.readexactly(2)
    name = (await reader.readexactly(length)).decode()
    (size,) = struct.unpack(">H", await reader.readexactly(2))
    return kind, name, await reader.readexactly(size)


async def serve(reader, writer):
    me = None
    try:
        kind, name, _ = await read_frame(reader)
        if kind != 0:
            return
        me = name
        for other, other_writer in clients.items():
            other_writer.write(frame(3, me))
            writer.write(frame(3, other))
        clients[me] = writer
        while True:
            kind, name, payload = await read_frame(reader)
            target = clients.get(name)
            if kind in (1, 2) and target is not None:
                target.write(frame(kind, me, payload))
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        if me is not None and clients.get(me) is writer:
            del clients[me]
        writer.close()


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7000)
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()
    server = await asyncio.start_server(serve, args.host, args.port)
    print("listening", flush=True)
    async with server:
        await asyncio.sleep(args.seconds)


if __name__ == "__main__":
    asyncio.run(main())
