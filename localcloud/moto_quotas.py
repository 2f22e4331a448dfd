"""Service Quotas as AWS answers for EC2's spot vCPU quotas, which moto does not know (it serves VPC
quotas only). A new account's values are what it gets (0 for the G and P families is common; the
standard families get a few vCPUs); RequestServiceQuotaIncrease sets a value at once (AWS approves
later, or not), so a test or a demo can play an account that asked.
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-spot-limits.html
"""

from __future__ import annotations

import json
from typing import Any

from moto.servicequotas.exceptions import NoSuchResource
from moto.servicequotas.models import ServiceQuotasBackend
from moto.servicequotas.responses import ServiceQuotasResponse

NEW_ACCOUNT_SPOT_VCPUS = {
    "L-34B43A08": ("All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests", 5.0),
    "L-3819A6DF": ("All G and VT Spot Instance Requests", 0.0),
    "L-7212CCBC": ("All P Spot Instance Requests", 0.0),
}
_vpc_quota = ServiceQuotasBackend.get_service_quota


def _spot_values(backend: ServiceQuotasBackend) -> dict[str, float]:
    if not hasattr(backend, "ec2_spot_vcpus"):
        backend.ec2_spot_vcpus = {code: value for code, (_, value) in NEW_ACCOUNT_SPOT_VCPUS.items()}  # type: ignore[attr-defined]
    return backend.ec2_spot_vcpus  # type: ignore[attr-defined,no-any-return]


def _quota(backend: ServiceQuotasBackend, code: str) -> dict[str, Any]:
    return {"ServiceCode": "ec2", "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)", "QuotaCode": code,
            "QuotaName": NEW_ACCOUNT_SPOT_VCPUS[code][0], "Value": _spot_values(backend)[code], "Unit": "None",
            "Adjustable": True, "GlobalQuota": False}


def get_service_quota(self: ServiceQuotasBackend, service_code: str, quota_code: str) -> dict[str, Any]:
    if service_code == "ec2" and quota_code in NEW_ACCOUNT_SPOT_VCPUS:
        return _quota(self, quota_code)
    return _vpc_quota(self, service_code, quota_code)  # type: ignore[no-any-return]


def request_service_quota_increase(self: ServiceQuotasResponse) -> str:
    params = json.loads(self.body)
    code = str(params.get("QuotaCode"))
    if params.get("ServiceCode") != "ec2" or code not in NEW_ACCOUNT_SPOT_VCPUS:
        raise NoSuchResource
    _spot_values(self.backend)[code] = float(params["DesiredValue"])
    return json.dumps({"RequestedQuota": {**_quota(self.backend, code), "Status": "APPROVED",
                                          "DesiredValue": float(params["DesiredValue"])}})


def install() -> None:
    ServiceQuotasBackend.get_service_quota = get_service_quota  # type: ignore[method-assign]
    ServiceQuotasResponse.request_service_quota_increase = request_service_quota_increase  # type: ignore[attr-defined]
