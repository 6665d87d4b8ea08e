#!/usr/bin/env node
import "../dist/roster.mjs"
