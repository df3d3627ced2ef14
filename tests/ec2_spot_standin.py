"""An EC2 endpoint that answers as AWS does for a one-time Spot Instance: moto's EC2 server
behind a loopback proxy that refuses ``StopInstances`` for an instance of a one-time Spot
request with AWS's documented error (moto stops any instance).

AWS's answer (the EC2 API's error XML; the sentence as AWS writes it, quoted in SkyPilot
#257, Airflow #22636 and cgcloud #100)::

    UnsupportedOperation: You can't stop the Spot Instance 'i-…' because it is associated
    with a one-time Spot Instance request. You can only stop Spot Instances associated
    with persistent Spot Instance requests.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import boto3

UNSUPPORTED = (
    "You can't stop the Spot Instance '{id}' because it is associated with a one-time Spot "
    "Instance request. You can only stop Spot Instances associated with persistent Spot "
    "Instance requests."
)
ERROR_XML = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
    "<Code>UnsupportedOperation</Code><Message>{message}</Message></Error></Errors>"
    "<RequestID>3f0a7d8e-1c2b-4e5f-9a6b-7c8d9e0f1a2b</RequestID></Response>"
)


def one_time_instances(moto_url: str) -> set[str]:
    ec2 = boto3.client("ec2", endpoint_url=moto_url, region_name="us-east-1")
    found = ec2.describe_spot_instance_requests()["SpotInstanceRequests"]
    return {r["InstanceId"] for r in found if r.get("Type") == "one-time" and "InstanceId" in r}


@contextmanager
def ec2_spot_standin(moto_url: str) -> Iterator[str]:
    """The proxy's URL (use it as ``AWS_ENDPOINT_URL_EC2``)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
            form = parse_qs(body.decode())
            if form.get("Action") == ["StopInstances"]:
                asked = form.get("InstanceId.1", [""])[0]
                if asked in one_time_instances(moto_url):
                    answer = ERROR_XML.format(message=UNSUPPORTED.format(id=asked)).encode()
                    self.send_response(400)
                    self.send_header("Content-Type", "text/xml;charset=UTF-8")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                    return
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            request = urllib.request.Request(
                moto_url + self.path, data=body, headers=headers, method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    status, data, kind = answer.status, answer.read(), answer.headers
            except urllib.error.HTTPError as e:
                status, data, kind = e.code, e.read(), e.headers
            self.send_response(status)
            self.send_header("Content-Type", kind.get("Content-Type", "text/xml"))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def spot_instance(moto_url: str, kind: str) -> str:
    """A running Spot Instance of a ``kind`` ("one-time" or "persistent") request."""
    ec2 = boto3.client("ec2", endpoint_url=moto_url, region_name="us-east-1")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    made = ec2.request_spot_instances(
        SpotPrice="40.0",
        InstanceCount=1,
        Type=kind,
        LaunchSpecification={"ImageId": image, "InstanceType": "p5.48xlarge"},
    )
    request_id = made["SpotInstanceRequests"][0]["SpotInstanceRequestId"]
    found = ec2.describe_spot_instance_requests(SpotInstanceRequestIds=[request_id])
    return str(found["SpotInstanceRequests"][0]["InstanceId"])


#: AWS's answer to a role without ``ec2:DescribeSpotPriceHistory`` (the EC2 API's error
#: XML, 403; the sentence as AWS writes it for an assumed role)
UNAUTHORIZED_XML = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
    "<Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this "
    "operation. User: arn:aws:sts::123456789012:assumed-role/gpu-node/i-0123456789abcdef0 "
    "is not authorized to perform: ec2:DescribeSpotPriceHistory because no identity-based "
    "policy allows the ec2:DescribeSpotPriceHistory action</Message></Error></Errors>"
    "<RequestID>0d4a7c0e-6f1e-4b8a-9c1d-2e3f4a5b6c7d</RequestID></Response>"
)


@contextmanager
def refusing_ec2() -> Iterator[tuple[str, list[str]]]:
    """An EC2 endpoint whose caller's role may ask nothing: every action answers
    ``UnauthorizedOperation`` (403). Yields its URL and the actions it was asked."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
            asked.extend(parse_qs(body.decode()).get("Action", []))
            answer = UNAUTHORIZED_XML.encode()
            self.send_response(403)
            self.send_header("Content-Type", "text/xml;charset=UTF-8")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()
