"""The MosaicML platform launcher: run configs, submission, and results carried home through run logs.

Kept out of the measuring core (`harness/`): the core runs a sweep wherever it is started, and this
package is how one gets started on the platform and how its results come back.
"""
