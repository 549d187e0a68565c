// Every sink shipped with the logger (each header documents its contract).
#pragma once

#include "thread_system/logger/sinks/callback_sink.hpp"
#include "thread_system/logger/sinks/console_sink.hpp"
#include "thread_system/logger/sinks/file_sink.hpp"
#include "thread_system/logger/sinks/null_sink.hpp"
#include "thread_system/logger/sinks/rotating_file_sink.hpp"
