"""The engine's services past validation, one module each: :mod:`.route`, :mod:`.table`, :mod:`.trip`,
:mod:`.nearest`, :mod:`.customize`, :mod:`.isochrone`. Each function takes the engine and the values its
:class:`gpuroute.engine.Engine` method validated (the snapped coordinates as a
:class:`gpuroute.geo.segments.PhantomSet`), and returns the OSRM answer."""
