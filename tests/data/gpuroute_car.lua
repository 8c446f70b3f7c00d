-- gpuroute's car profile (gpuroute.io.osm.PROFILES["car"]) as an OSRM Lua profile (api_version 4).
--
-- Written for the differential test tests/server/test_osrm_differential.py: osrm-extract with this
-- profile builds the same routable network, with the same speed in each direction, as
-- gpuroute.load_osm(..., profile="car"); then osrm-routed and gpuroute's Engine must agree.
--
-- What it mirrors (Profile.way_speeds and Profile.parse_maxspeed, line by line):
--   * the routable highway=* values and their default speeds (km/h);
--   * ways with a forbidden tag value (area=yes, impassable=yes, status=impassable,
--     service=emergency_access) are dropped;
--   * access: the first of motorcar, motor_vehicle, vehicle, access that is present decides; a
--     blacklisted value drops the way (no access whitelist: any other value, e.g. destination, is open);
--   * oneway=reversible|alternating drops the way; oneway=-1 / yes|1|true; implied oneway on motorway and
--     junction=roundabout|circular unless oneway=no (only the plain oneway tag: no oneway:motorcar);
--   * maxspeed (numbers, "30 mph", symbolic values, XX:zone fallbacks), maxspeed:forward/:backward
--     overriding it per direction, times 0.8; else the highway default;
--   * no turn penalties, no U-turn penalty, no traffic signals, no barriers, no turn restrictions
--     (gpuroute's Engine routes on a node-based hierarchy that does not apply them), no ferries,
--     no surface/smoothness/width/height limits, no side-road or priority penalties;
--   * weight_name = 'duration': OSRM then stores per segment max(1, round(10 * length / speed)) deciseconds,
--     which is gpuroute's travel_time formula (its length is its own: see the test's docstring).
--
-- The block between the BEGIN/END markers is generated from the Python profile; the test checks it
-- (regenerate: .venv/bin/python tests/server/test_osrm_differential.py --write-lua).

api_version = 4

function setup()
  return {
    properties = {
      weight_name                   = 'duration',
      max_speed_for_map_matching    = 180 / 3.6,
      process_call_tagless_node     = false,
      u_turn_penalty                = 0,
      traffic_signal_penalty        = 0,
      continue_straight_at_waypoint = true,
      use_turn_restrictions         = false,
      left_hand_driving             = false,
    },
    -- BEGIN generated from gpuroute.io.osm.PROFILES["car-basic"]
    highway_speeds = {
      ["motorway"] = 90,
      ["motorway_link"] = 45,
      ["trunk"] = 85,
      ["trunk_link"] = 40,
      ["primary"] = 65,
      ["primary_link"] = 30,
      ["secondary"] = 55,
      ["secondary_link"] = 25,
      ["tertiary"] = 40,
      ["tertiary_link"] = 20,
      ["unclassified"] = 25,
      ["residential"] = 25,
      ["living_street"] = 10,
      ["service"] = 15,
    },
    access_tags = {"motorcar", "motor_vehicle", "vehicle", "access"},
    access_blacklist = {
      ["agricultural"] = true,
      ["customers"] = true,
      ["delivery"] = true,
      ["emergency"] = true,
      ["forestry"] = true,
      ["no"] = true,
      ["private"] = true,
      ["psv"] = true,
    },
    maxspeed_table = {
      ["at:rural"] = 100.0,
      ["at:trunk"] = 100.0,
      ["be:motorway"] = 120.0,
      ["ch:motorway"] = 120.0,
      ["ch:rural"] = 80.0,
      ["ch:trunk"] = 100.0,
      ["cz:motorway"] = 0.0,
      ["cz:trunk"] = 0.0,
      ["de:living_street"] = 7.0,
      ["de:motorway"] = 0.0,
      ["de:rural"] = 100.0,
      ["dk:rural"] = 80.0,
      ["fr:rural"] = 80.0,
      ["gb:motorway"] = 112.65408000000001,
      ["gb:nsl_dual"] = 112.65408000000001,
      ["gb:nsl_single"] = 96.56064,
      ["nl:rural"] = 80.0,
      ["nl:trunk"] = 100.0,
      ["no:motorway"] = 110.0,
      ["no:rural"] = 80.0,
      ["none"] = 140.0,
      ["pl:motorway"] = 140.0,
      ["pl:rural"] = 100.0,
      ["ro:trunk"] = 100.0,
      ["ru:living_street"] = 20.0,
      ["ru:motorway"] = 110.0,
      ["ru:urban"] = 60.0,
      ["ua:urban"] = 60.0,
      ["uk:motorway"] = 112.65408000000001,
      ["uk:nsl_dual"] = 112.65408000000001,
      ["uk:nsl_single"] = 96.56064,
      ["walk"] = 5.0,
    },
    maxspeed_table_default = {
      ["motorway"] = 130.0,
      ["rural"] = 90.0,
      ["trunk"] = 110.0,
      ["urban"] = 50.0,
    },
    speed_reduction = 0.8,
    implied_oneway = {
      ["motorway"] = true,
    },
    forbidden = {
      ["area"] = {["yes"] = true},
      ["impassable"] = {["yes"] = true},
      ["service"] = {["emergency_access"] = true},
      ["status"] = {["impassable"] = true},
    },
    obey_oneway = true,
    mph = 1.609344,
    -- END generated
  }
end

-- Profile.parse_maxspeed: km/h, 0 when absent or not understood.
local function parse_maxspeed(profile, value)
  if value == nil or value == '' then
    return 0
  end
  local s = string.lower(value:match('^%s*(.-)%s*$'))
  local num = s:match('^%s*(%d+[.,]%d+)') or s:match('^%s*(%d+)')
  if num then
    local v = tonumber((num:gsub(',', '.')))
    if s:find('mph', 1, true) or s:find('mp/h', 1, true) then
      v = v * profile.mph
    end
    return v
  end
  local t = profile.maxspeed_table[s]
  if t ~= nil then
    return t
  end
  local zone = s:match('^[a-z][a-z]:([a-z_]+)$') or s:match('^[a-z][a-z]%-[a-z]+:([a-z_]+)$')
  if zone then
    return profile.maxspeed_table_default[zone] or 0
  end
  return 0
end

function process_node(profile, node, result, relations)
  -- no barriers, no traffic signals
end

-- Profile.way_speeds
function process_way(profile, way, result, relations)
  local highway = way:get_value_by_key('highway')
  local default = highway and profile.highway_speeds[highway]
  if not default then
    return
  end
  for key, values in pairs(profile.forbidden) do
    local v = way:get_value_by_key(key)
    if v ~= nil and values[v] then
      return
    end
  end
  for _, key in ipairs(profile.access_tags) do
    local a = way:get_value_by_key(key)
    if a ~= nil then
      if profile.access_blacklist[a] then
        return
      end
      break
    end
  end
  local oneway = way:get_value_by_key('oneway')
  if oneway == 'reversible' or oneway == 'alternating' then
    return
  end
  local ms = parse_maxspeed(profile, way:get_value_by_key('maxspeed'))
  local fwd_ms = parse_maxspeed(profile, way:get_value_by_key('maxspeed:forward'))
  local bwd_ms = parse_maxspeed(profile, way:get_value_by_key('maxspeed:backward'))
  if fwd_ms == 0 then fwd_ms = ms end
  if bwd_ms == 0 then bwd_ms = ms end
  local fwd = fwd_ms > 0 and fwd_ms * profile.speed_reduction or default
  local bwd = bwd_ms > 0 and bwd_ms * profile.speed_reduction or default
  if profile.obey_oneway then
    local junction = way:get_value_by_key('junction')
    if oneway == '-1' then
      fwd = 0
    elseif oneway == 'yes' or oneway == '1' or oneway == 'true' then
      bwd = 0
    elseif oneway ~= 'no' and (profile.implied_oneway[highway]
                               or junction == 'roundabout' or junction == 'circular') then
      bwd = 0
    end
  end
  if fwd <= 0 and bwd <= 0 then
    return
  end
  if fwd > 0 then
    result.forward_mode = mode.driving
    result.forward_speed = fwd
  else
    result.forward_mode = mode.inaccessible
  end
  if bwd > 0 then
    result.backward_mode = mode.driving
    result.backward_speed = bwd
  else
    result.backward_mode = mode.inaccessible
  end
  local name = way:get_value_by_key('name')
  if name == nil or name == '' then
    name = way:get_value_by_key('ref')
  end
  if name then
    result.name = name
  end
end

function process_turn(profile, turn)
  -- no turn, U-turn or signal penalties
  turn.duration = 0
  turn.weight = 0
end

return {
  setup = setup,
  process_way = process_way,
  process_node = process_node,
  process_turn = process_turn
}
