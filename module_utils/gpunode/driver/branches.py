# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NVIDIA driver branches per PCI device ID (vendor 10de). Generated data: do not edit.

Made by scripts/gen-branch-table.py, which cites each source beside its data:
Debian nvidia-detect 550.163.01-5.1's per-branch ID lists (data/nvidia-detect-ids),
NVIDIA's support pages of the 620 and 615 branches (read 2026-11-28) and release
notes, NVIDIA's statement that Grace Hopper and Blackwell need the open kernel
modules, NVIDIA gpu-admin-tools' Blackwell device ID ranges, and the GB10's ID from
published lspci output. Regenerate with that script.

BRANCHES lists the branches gpunode installs, newest first, BRANCH_NOTES what
some of them are, BRANCH_ENDS the last month NVIDIA supports some. SUPPORT maps
the branches (space-separated, newest first) to the device IDs they all drive;
ARCH_SUPPORT adds branches that drive some IDs on one machine type only.
BLACKWELL_RANGES are the Blackwell chips' device ID ranges, driven by
BLACKWELL_BRANCHES (the GB10's one ID by its SUPPORT entry); they and
GRACE_HOPPER_IDS need the open kernel modules. LEGACY_ONLY names the last
(uninstallable) legacy branch of GPUs no branch in BRANCHES drives. An ID in none
of these above HIGHEST_KNOWN_ID is newer than the data and is served by
NEWEST_BRANCH; one below it, unknown to DATA_BRANCH, by the branches after
DATA_BRANCH that drive its known neighbours. TURING_FIRST_ID: the open kernel
modules drive this ID and up, and branches from 590 on only these.
NAMES are fallback names when pci.ids has none.
"""

DATA_SOURCE = "Debian nvidia-detect 550.163.01-5.1"
SOURCES = (
    "Debian nvidia-detect 550.163.01-5.1 (data/nvidia-detect-ids)",
    "https://docs.nvidia.com/datacenter/tesla/drivers/620/supported-drivers-and-cuda-toolkit-versions.html",
    "https://docs.nvidia.com/datacenter/tesla/drivers/615/supported-drivers-and-cuda-toolkit-versions.html",
    "https://developer.nvidia.com/blog/nvidia-transitions-fully-towards-open-source-gpu-kernel-modules/",
    "https://github.com/NVIDIA/gpu-admin-tools (gpu/devid_chips.py, gpu/devid_names.py @82422cc)",
    "https://wiki.gentoo.org/wiki/DGX_Spark (lspci -nn: GB20B [GB10] [10de:2e12])",
)
BRANCHES = ("620", "610", "595", "590", "580", "570", "550", "535", "470", "390", "340")
NEWEST_BRANCH = "620"
HIGHEST_KNOWN_ID = "28f8"
DATA_BRANCH = "550"
TURING_FIRST_ID = "1e00"

BRANCH_NOTES = {
    "620": "long-term support branch until 2029-09",
    "610": "new feature branch until 2026-08",
    "595": "production branch until 2027-03",
    "590": "the first branch without Maxwell, Pascal and Volta",
    "580": "long-term support branch until 2028-06; the last for Maxwell, Pascal and Volta",
    "570": "the first branch for Blackwell",
    "535": "long-term support branch until 2026-06",
    "470": "the last for Kepler",
    "390": "the last for Fermi",
    "340": "the last for the Tesla architecture",
}

BRANCH_ENDS = {
    "620": "2029-09",
    "610": "2026-08",
    "595": "2027-03",
    "580": "2028-06",
    "535": "2026-06",
}

SUPPORT = {
    "620 610 595 590 580 570 550 535 470": (
        "1e02 1e04 1e07 1e09 1e30 1e36 1e78 1e81 1e82 1e84 1e87 1e89 1e90 1e91 1e93 1eb0 1eb1 1eb4 "
        "1eb5 1eb6 1eb8 1ec2 1ec7 1ed0 1ed1 1ed3 1ef5 1f02 1f03 1f06 1f07 1f08 1f0a 1f0b 1f10 1f11 "
        "1f12 1f14 1f15 1f36 1f42 1f47 1f50 1f51 1f54 1f55 1f76 1f82 1f91 1f95 1f96 1f97 1f98 1f99 "
        "1f9c 1f9d 1f9f 1fa0 1fb0 1fb1 1fb2 1fb6 1fb7 1fb8 1fb9 1fba 1fbb 1fbc 1fdd 1ff0 1ff2 1ff9 "
        "20b0 20b1 20b2 20b3 20b5 20b6 20b7 20f0 20f1 20f2 2182 2184 2187 2188 2189 2191 2192 21c4 "
        "21d1 2203 2204 2206 2208 220a 220d 2216 2230 2231 2232 2235 2236 2237 2414 2420 2438 2460 "
        "2482 2484 2486 2487 2488 2489 248a 249c 249d 24a0 24b0 24b6 24b7 24b8 24b9 24ba 24bb 24dc "
        "24dd 24e0 24fa 2503 2504 2507 2508 2520 2523 2531 2560 2563 2571 25a0 25a2 25a5 25a6 25a7 "
        "25a9 25b6 25b8 25b9 25ba 25bb 25e0 25e2 25e5 25f9 25fa"
    ),
    "620 610 595 590 580 570 550 535": (
        "1e37 1eb9 1f83 20bd 20f3 20f5 20f6 20fd 2207 2233 2238 2321 2322 2324 2329 232c 2330 2331 "
        "2339 233a 2342 24b1 24c7 24c9 2521 2544 2582 2584 25aa 25ab 25ac 25ad 25bc 25bd 25ec 25ed "
        "25fb 2684 26b1 26b2 26b3 26b5 26b8 26b9 26ba 2704 2717 2730 2757 2770 2782 2786 27a0 27b0 "
        "27b1 27b2 27b6 27b8 27ba 27bb 27e0 27fb 2803 2805 2820 2838 2860 2882 28a0 28a1 28b8 28b9 "
        "28ba 28bb 28e0 28e1 28f8"
    ),
    "580 570 550 535 470 390 340": "1340 1341 1380 1381 1382 1390 1391 1392 1393 13ba 13bb",
    "620 610 595 590 580 570 550": "2335 25b0 25b2 2685 2702 2705 2709 2783 2788 2808 2822 28a3 28b0 28e3",
    "580 570 550 535 470 390": (
        "1344 1346 1347 1348 1349 134b 134d 134e 134f 137a 137b 1398 1399 139a 139b 139c 139d 13b0 "
        "13b1 13b2 13b3 13b4 13b6 13b9 13bc 13c0 13c2 13d7 13d8 13d9 13da 13f0 13f1 13f2 13f3 13f8 "
        "13f9 13fa 13fb 1401 1402 1406 1407 1427 1430 1431 1436 15f0 15f7 15f8 15f9 1617 1618 1619 "
        "161a 1667 174d 174e 179c 17c2 17c8 17f0 17f1 17fd 1b00 1b02 1b06 1b30 1b38 1b80 1b81 1b82 "
        "1b83 1b84 1b87 1ba0 1ba1 1bb0 1bb1 1bb4 1bb5 1bb6 1bb7 1bb8 1bb9 1bbb 1bc7 1be0 1be1 1c02 "
        "1c03 1c04 1c06 1c07 1c09 1c20 1c21 1c22 1c30 1c60 1c61 1c62 1c81 1c82 1c83 1c8c 1c8d 1c8f "
        "1cb1 1cb2 1cb3 1cb6 1cba 1cbb 1cbc 1d01 1d10 1d12 1d33"
    ),
    "580 570 550 535 470": (
        "1ba2 1c23 1c31 1c90 1c91 1c92 1c94 1c96 1cbd 1cfa 1cfb 1d02 1d11 1d13 1d16 1d34 1d52 1d81 "
        "1db1 1db3 1db4 1db5 1db6 1db7 1db8 1dba 1df0 1df2 1df6"
    ),
    "620 610 595 590 580": "2e12",
    "470 390 340": (
        "0fc0 0fc1 0fc2 0fc6 0fc8 0fcd 0fce 0fd1 0fd2 0fd3 0fd4 0fd5 0fd8 0fd9 0fdf 0fe0 0fe1 0fe2 "
        "0fe3 0fe4 0fe9 0fea 0fec 0ff3 0ff6 0ff8 0ff9 0ffa 0ffb 0ffc 0ffd 0ffe 0fff 1001 1004 1005 "
        "1007 1008 100a 100c 1021 1022 1023 1024 1026 1027 1028 1029 103a 103c 1180 1183 1184 1185 "
        "1187 1188 1189 118a 118e 118f 1193 1194 1195 1198 1199 119a 119d 119e 119f 11a0 11a1 11a2 "
        "11a3 11a7 11b4 11b6 11b7 11b8 11ba 11bc 11bd 11be 11c0 11c2 11c3 11c4 11c5 11c6 11c8 11e0 "
        "11e1 11e2 11e3 11fa 11fc 1280 1281 1282 1284 1286 1287 1288 1290 1291 1292 1293 1295 1296 "
        "1298 12b9 12ba"
    ),
    "390 340": (
        "06c0 06c4 06ca 06cd 06d1 06d2 06d8 06d9 06da 06dc 06dd 06de 06df 0dc0 0dc4 0dc5 0dc6 0dcd "
        "0dce 0dd1 0dd2 0dd3 0dd6 0dd8 0dda 0de0 0de1 0de2 0de3 0de4 0de5 0de7 0de8 0de9 0dea 0deb "
        "0dec 0ded 0dee 0def 0df0 0df1 0df2 0df3 0df4 0df5 0df6 0df7 0df8 0df9 0dfa 0dfc 0e22 0e23 "
        "0e24 0e30 0e31 0e3a 0e3b 0f00 0f01 0f02 1040 1042 1048 1049 104a 104b 104c 1050 1051 1052 "
        "1054 1055 1056 1057 1058 1059 105a 105b 107c 107d 1080 1081 1082 1084 1086 1087 1088 1089 "
        "108b 1091 1094 1096 109a 109b 1140 1200 1201 1203 1205 1206 1207 1208 1210 1211 1212 1213 "
        "1241 1243 1244 1245 1246 1247 1248 1249 124b 124d 1251"
    ),
    "470 390": "0fc9 0fed 0fee 102a 102d 11cb 1289 128b 1299 129a 137d 1bb3",
    "340": (
        "0191 0193 0194 0197 019d 019e 0400 0401 0402 0403 0404 0405 0406 0407 0408 0409 040a 040b "
        "040c 040d 040e 040f 0410 0420 0421 0422 0423 0424 0425 0426 0427 0428 0429 042a 042b 042c "
        "042d 042e 042f 05e0 05e1 05e2 05e3 05e6 05e7 05ea 05eb 05ed 05f8 05f9 05fd 05fe 05ff 0600 "
        "0601 0602 0603 0604 0605 0606 0607 0608 0609 060a 060b 060c 060d 060f 0610 0611 0612 0613 "
        "0614 0615 0617 0618 0619 061a 061b 061c 061d 061e 061f 0621 0622 0623 0625 0626 0627 0628 "
        "062a 062b 062c 062d 062e 0630 0631 0632 0635 0637 0638 063a 0640 0641 0643 0644 0645 0646 "
        "0647 0648 0649 064a 064b 064c 0651 0652 0653 0654 0655 0656 0658 0659 065a 065b 065c 06e0 "
        "06e1 06e2 06e3 06e4 06e5 06e6 06e7 06e8 06e9 06ea 06eb 06ec 06ef 06f1 06f8 06f9 06fa 06fb "
        "06fd 06ff 0840 0844 0845 0846 0847 0848 0849 084a 084b 084c 084d 084f 0860 0861 0862 0863 "
        "0864 0865 0866 0867 0868 0869 086a 086c 086d 086e 086f 0870 0871 0872 0873 0874 0876 087a "
        "087d 087e 087f 08a0 08a2 08a3 08a4 08a5 0a20 0a22 0a23 0a26 0a27 0a28 0a29 0a2a 0a2b 0a2c "
        "0a2d 0a32 0a34 0a35 0a38 0a3c 0a60 0a62 0a63 0a64 0a65 0a66 0a67 0a68 0a69 0a6a 0a6c 0a6e "
        "0a6f 0a70 0a71 0a72 0a73 0a74 0a75 0a76 0a78 0a7a 0a7c 0ca0 0ca2 0ca3 0ca4 0ca5 0ca7 0ca8 "
        "0ca9 0cac 0caf 0cb0 0cb1 0cbc 0fef 0ff2 10c0 10c3 10c5 10d8 11bf"
    ),
    "390": "0f03",
    "470": "1df5 1f09",
}

ARCH_SUPPORT = {
    "x86_64": {
        "390": "1d81 1db1 1db3 1db4 1db5 1db6 1db7 1dba",
    },
}

BLACKWELL_BRANCHES = "620 610 595 590 580 570"
BLACKWELL_RANGES = (
    ("2900", "297f", "Blackwell GB100"),
    ("2980", "29ff", "Blackwell GB102"),
    ("2b80", "2bff", "Blackwell GB202"),
    ("2c00", "2c7f", "Blackwell GB203"),
    ("2d00", "2d7f", "Blackwell GB206"),
    ("2d80", "2dff", "Blackwell GB207"),
    ("2f00", "2f7f", "Blackwell GB205"),
    ("3180", "31ff", "Blackwell GB110"),
    ("3200", "327f", "Blackwell GB112"),
    ("2e12", "2e12", "Blackwell GB10 (DGX Spark)"),
)
GRACE_HOPPER_IDS = ("2342", "2343", "2345", "2348")

LEGACY_ONLY = {
    "304": (
        "0040 0041 0042 0043 0044 0045 0046 0047 0048 004e 0090 0091 0092 0093 0095 0098 0099 009d "
        "00c0 00c1 00c2 00c3 00c8 00c9 00cc 00cd 00ce 00f1 00f2 00f3 00f4 00f5 00f6 00f8 00f9 0140 "
        "0141 0142 0143 0144 0145 0146 0147 0148 0149 014a 014c 014d 014e 014f 0160 0161 0162 0163 "
        "0164 0165 0166 0167 0168 0169 016a 01d0 01d1 01d2 01d3 01d6 01d7 01d8 01da 01db 01dc 01dd "
        "01de 01df 0221 0222 0240 0241 0242 0244 0245 0247 0290 0291 0292 0293 0294 0295 0297 0298 "
        "0299 029a 029b 029c 029d 029e 029f 02e0 02e1 02e2 02e3 02e4 038b 0390 0391 0392 0393 0394 "
        "0395 0397 0398 0399 039c 039e 03d0 03d1 03d2 03d5 03d6 0531 0533 053a 053b 053e 07e0 07e1 "
        "07e2 07e3 07e5"
    ),
    "173": (
        "00f0 00fa 00fb 00fc 00fd 00fe 0211 0212 0215 0218 0301 0302 0308 0309 0311 0312 0314 031a "
        "031b 031c 0320 0321 0322 0323 0324 0325 0326 0327 0328 032a 032b 032c 032d 0330 0331 0332 "
        "0333 0334 0338 033f 0341 0342 0343 0344 0347 0348 034c 034e"
    ),
    "96": (
        "00ff 0110 0111 0112 0113 0170 0171 0172 0173 0174 0175 0176 0177 0178 0179 017a 017c 017d "
        "0181 0182 0183 0185 0188 018a 018b 018c 01a0 01f0 0200 0201 0202 0203 0250 0251 0253 0258 "
        "0259 025b 0280 0281 0282 0286 0288 0289 028c"
    ),
    "71": "0020 0028 0029 002c 002d 00a0 0100 0101 0103 0150 0151 0152 0153",
}

NAMES = {
    "102d": "Tesla K80",
    "1af1": "A100 NVSwitch",
    "1db1": "Tesla V100 SXM2 16GB",
    "1eb8": "Tesla T4",
    "20b0": "A100 SXM4 40GB",
    "20b2": "A100 SXM4 80GB",
    "2236": "A10",
    "22a3": "H100 NVSwitch",
    "2330": "H100 SXM5 80GB",
    "2331": "H100 PCIe",
    "2335": "H200 SXM 141GB",
    "2342": "GH200",
    "26b5": "L40",
    "26b9": "L40S",
    "27b8": "L4",
    "2901": "B200",
    "2941": "GB200",
    "2e12": "GB10",
}
