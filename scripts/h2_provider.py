"""The fake provider over TLS and HTTP/2: scripts/fake_provider's paths, scenarios, headers and body bytes,
served by an HTTP/2-only server with a self-signed certificate.

Its clients must speak HTTP/2 over TLS and offer it by ALPN (`h2`): a client that offers only HTTP/1.1, or
no ALPN, has its connection closed unanswered. The certificate (for 127.0.0.1 and localhost) is made at
start-up in a temporary directory that is removed at exit: clients and proxies must not verify it
(mitmproxy: `--ssl-insecure`; curl: `--http2 -k`; httpx: `http2=True, verify=False`).

Many streams run at once on one connection; each event goes out as its own DATA frame (split only when the
peer's flow-control window or frame size is smaller), with the delay between events, and END_STREAM ends
the body. The answers are the HTTP/1.1 provider's own (fake_provider.Provider, X-Fake-* headers included):
where it drops the connection (`truncated`, `drop-mid-event`), this resets the stream (RST_STREAM), and
X-Fake-Framing: length only adds a Content-Length header (HTTP/2 frames every body).

.venv/bin/python scripts/h2_provider.py [--host 127.0.0.1] [--port 0] [--delay 0.02]"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
import sys
import tempfile
import traceback
from pathlib import Path

import fake_provider as fp
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

READ_SIZE = 65536


# -- TLS -----------------------------------------------------------------------------------------------------


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed server certificate for 127.0.0.1 and localhost: (cert.pem, key.pem) in directory."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "h2_provider")])
    now = datetime.datetime.now(datetime.UTC)
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # RFC 9113 9.2
    context.options |= ssl.OP_NO_COMPRESSION
    context.set_alpn_protocols(["h2"])
    context.load_cert_chain(cert, key)
    return context


# -- one HTTP/2 connection -----------------------------------------------------------------------------------


class _Incoming:
    """A request whose headers have arrived and whose body is arriving."""

    def __init__(self, headers: list[tuple[bytes, bytes]]) -> None:
        self.fields = [(name, value) for name, value in headers if not name.startswith(b":")]
        pseudo = {name: value.decode("latin-1") for name, value in headers if name.startswith(b":")}
        self.method = pseudo.get(b":method", "GET")
        self.target = pseudo.get(b":path", "/")
        self.body = bytearray()
        self.too_large = False

    def add(self, data: bytes) -> None:
        if self.too_large or len(self.body) + len(data) > fp.MAX_BODY_BYTES:
            self.too_large = True
            self.body.clear()
        else:
            self.body += data

    def request(self) -> fp.Request:
        return fp.Request.from_fields(self.method, self.target, self.fields, bytes(self.body))


class _Connection:
    """Reads frames, starts one task per complete request, and sends what the tasks produce."""

    def __init__(
        self, provider: _Provider, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.provider = provider
        self.reader, self.writer = reader, writer
        config = h2.config.H2Configuration(client_side=False, header_encoding=None)
        self.h2 = h2.connection.H2Connection(config)
        self.incoming: dict[int, _Incoming] = {}
        self.streams: dict[int, asyncio.Task] = {}
        self._window = asyncio.Event()  # set (and replaced) whenever a send window may have grown

    async def run(self) -> None:
        self.h2.initiate_connection()
        await self.flush()
        try:
            while data := await self.reader.read(READ_SIZE):
                try:
                    received = self.h2.receive_data(data)
                except h2.exceptions.ProtocolError:
                    await self.flush()  # h2 queued the GOAWAY
                    return
                for event in received:
                    if isinstance(event, h2.events.ConnectionTerminated):
                        return
                    self.on(event)
                await self.flush()
        finally:
            for task in list(self.streams.values()):
                task.cancel()
            await asyncio.gather(*self.streams.values(), return_exceptions=True)

    def on(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            self.incoming[event.stream_id] = _Incoming(event.headers)
        elif isinstance(event, h2.events.DataReceived):
            if incoming := self.incoming.get(event.stream_id):
                incoming.add(event.data)
            # The body is kept (up to the cap) however fast it comes: give the window back at once.
            self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            if incoming := self.incoming.pop(event.stream_id, None):
                task = asyncio.create_task(self.answer(event.stream_id, incoming))
                self.streams[event.stream_id] = task
        elif isinstance(event, h2.events.StreamReset):
            self.incoming.pop(event.stream_id, None)
            if task := self.streams.pop(event.stream_id, None):
                task.cancel()
        elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            self._window.set()
            self._window = asyncio.Event()

    async def flush(self) -> None:
        if data := self.h2.data_to_send():
            self.writer.write(data)
        await self.writer.drain()

    async def answer(self, stream_id: int, incoming: _Incoming) -> None:
        try:
            if incoming.too_large:
                await _Stream(self, stream_id).send(413, "text/plain", b"request body too large\n")
            else:
                await self.provider.answer(incoming.request(), _Stream(self, stream_id))
        except (asyncio.CancelledError, ConnectionError, h2.exceptions.ProtocolError):
            # Reset by the client, or the connection is gone: that stream is simply over. Ending cancelled
            # is not needed by anyone (the connection gathers its tasks), so the task ends normally.
            pass
        except Exception:  # noqa: BLE001 - a bug: say so loudly, and end the stream rather than hang it
            traceback.print_exc()
            with contextlib.suppress(Exception):
                self.h2.reset_stream(stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)
                await self.flush()
        finally:
            if self.streams.get(stream_id) is asyncio.current_task():
                del self.streams[stream_id]

    async def send_data(self, stream_id: int, data: bytes) -> None:
        """One DATA frame for data, unless the peer's window or frame size makes it several; waits for room."""
        view = memoryview(data)
        while True:
            room = min(self.h2.local_flow_control_window(stream_id), self.h2.max_outbound_frame_size)
            if room <= 0 and view:
                await self._window.wait()  # a WindowUpdated or new SETTINGS; then look again
                continue
            self.h2.send_data(stream_id, bytes(view[:room]))
            view = view[room:]
            await self.flush()
            if not view:
                return

    async def send_headers(self, stream_id: int, status: int, headers: dict[str, str]) -> None:
        fields = [(":status", str(status)), ("server", "h2_provider")]
        fields += [(name.lower(), value) for name, value in headers.items()]
        self.h2.send_headers(stream_id, fields)
        await self.flush()

    async def end(self, stream_id: int) -> None:
        self.h2.end_stream(stream_id)
        await self.flush()


class _Stream(fp.Transport):
    """One stream of the connection as the provider's Transport: each piece its own DATA frame."""

    def __init__(self, conn: _Connection, stream_id: int) -> None:
        self.conn, self.stream_id = conn, stream_id

    async def start(self, status: int, headers: dict[str, str], *, close: bool = False) -> None:
        # close is HTTP/1.1's: other streams of this connection go on.
        await self.conn.send_headers(self.stream_id, status, headers)

    async def write(self, piece: bytes) -> None:
        await self.conn.send_data(self.stream_id, piece)

    async def end(self) -> None:
        await self.conn.end(self.stream_id)

    async def abort(self) -> None:
        # HTTP/2's abort of one stream: the body ends without END_STREAM, the connection lives on.
        self.conn.h2.reset_stream(self.stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)
        await self.conn.flush()


# -- the provider --------------------------------------------------------------------------------------------


class _Provider(fp.Provider):
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        try:
            ssl_object = writer.get_extra_info("ssl_object")
            if ssl_object is not None and ssl_object.selected_alpn_protocol() == "h2":
                await _Connection(self, reader, writer).run()
            # Otherwise the client offered no h2 (HTTP/1.1 only, or no ALPN): nothing to speak with it.
        except (ConnectionError, TimeoutError, ssl.SSLError):
            pass
        except asyncio.CancelledError:
            # Shutdown cancels connections. Ending cancelled would make asyncio 3.12.1's client_connected_cb
            # callback call task.exception() and print a traceback, so the task ends normally instead.
            # A TLS close waits for the peer's close_notify (30 s by default): at shutdown, just drop it.
            writer.transport.abort()
        finally:
            self.connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 5)


# --help prints the docstring whole, but for the command line it ends with (argparse prints its own).
DESCRIPTION = __doc__.rpartition("\n\n")[0]


def main(argv: list[str] | None = None) -> int:
    args = fp.arguments(argv, DESCRIPTION, websocket=False)
    with tempfile.TemporaryDirectory(prefix="h2_provider-") as directory:
        context = _tls_context(*make_certificate(Path(directory)))
        provider = _Provider(args.delay)
        try:
            return asyncio.run(fp.serve(provider, "h2_provider", "https", args.host, args.port, ssl=context))
        except KeyboardInterrupt:  # only before the loop's own SIGINT handler is in place
            return 0


if __name__ == "__main__":
    sys.exit(main())
